//! `--observe`: the worker process with postpone's metrics recorded (a Prometheus recorder, as an
//! application would install) and a `tracing` subscriber at INFO writing to stderr (postpone's per-job
//! span on), to measure what observability costs. Needs the `observe` feature. `BENCH_OBSERVE=metrics`
//! (or `tracing`) installs only that one, to tell their costs apart.

use crate::BoxResult;

/// What the worker process observed through: the recorder's handle.
#[cfg(feature = "observe")]
pub(crate) type Observed = metrics_exporter_prometheus::PrometheusHandle;
#[cfg(not(feature = "observe"))]
pub(crate) type Observed = ();

/// Installs the recorder and the subscriber when `on`, before the worker starts.
pub(crate) fn install(on: bool) -> BoxResult<Option<Observed>> {
    if !on {
        return Ok(None);
    }
    #[cfg(feature = "observe")]
    {
        let only = std::env::var("BENCH_OBSERVE").unwrap_or_default();
        let handle = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = if only != "tracing" {
            let scrape = handle.handle();
            metrics::set_global_recorder(handle)?;
            Some(scrape)
        } else {
            None
        };
        if only != "metrics" {
            tracing_subscriber::fmt()
                .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .try_init()?;
        }
        Ok(handle)
    }
    #[cfg(not(feature = "observe"))]
    Err("--observe needs a build with `--features observe`".into())
}

/// Checks that the metrics saw every job: `postpone_jobs_finished_total{outcome="done"}` = `handled`.
pub(crate) fn check(observed: Option<&Observed>, handled: u64) -> BoxResult<()> {
    #[cfg(feature = "observe")]
    if let Some(handle) = observed {
        let scrape = handle.render();
        let done = scrape
            .lines()
            .filter(|l| {
                l.starts_with("postpone_jobs_finished_total{") && l.contains("outcome=\"done\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
        eprintln!(
            "    metrics: {done} jobs done, {} series",
            scrape.lines().filter(|l| !l.starts_with('#')).count()
        );
        if done as u64 != handled {
            return Err(
                format!("the metrics counted {done} jobs done, the handler {handled}").into(),
            );
        }
    }
    #[cfg(not(feature = "observe"))]
    let _ = (observed, handled);
    Ok(())
}
