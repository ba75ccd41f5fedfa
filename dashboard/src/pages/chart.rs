//! Throughput per minute for the last hour, as the bars of a small inline SVG (numbers only: the
//! template draws it, escaped like everything else).

use postpone::ops::MinuteCounts;

/// Minutes the overview's chart shows.
pub(crate) const MINUTES: u32 = 60;
const WIDTH: u32 = 4;
/// The chart's height in px.
pub(crate) const HEIGHT: u32 = 36;

/// One minute's bar: processed (below) and failed (stacked above).
#[derive(Debug)]
pub(crate) struct Bar {
    pub(crate) x: u32,
    pub(crate) ok_y: u32,
    pub(crate) ok_h: u32,
    pub(crate) fail_y: u32,
    pub(crate) fail_h: u32,
    pub(crate) title: String,
}

/// A topic's chart.
#[derive(Debug)]
pub(crate) struct Chart {
    pub(crate) bars: Vec<Bar>,
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) processed: u64,
    pub(crate) failed: u64,
    pub(crate) enqueued: u64,
    pub(crate) peak: u64,
}

impl Chart {
    /// The last [`MINUTES`] minutes up to `now_ms` from a history (which leaves out empty minutes).
    pub(crate) fn new(history: &[MinuteCounts], now_ms: i64) -> Self {
        let this_minute = now_ms - now_ms.rem_euclid(60_000);
        let first = this_minute - i64::from(MINUTES - 1) * 60_000;
        let mut minutes = vec![MinuteCounts::default(); MINUTES as usize];
        for m in history {
            if m.minute_ms >= first && m.minute_ms <= this_minute {
                minutes[((m.minute_ms - first) / 60_000) as usize] = *m;
            }
        }
        let peak = minutes
            .iter()
            .map(|m| m.processed + m.failed)
            .max()
            .unwrap_or(0);
        let scale = |n: u64| -> u32 {
            if n == 0 {
                0
            } else {
                // At least a pixel for anything that happened.
                ((n * u64::from(HEIGHT)).div_ceil(peak.max(1)) as u32).clamp(1, HEIGHT)
            }
        };
        let bars = minutes
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let ok_h = scale(m.processed);
                let fail_h = scale(m.failed).min(HEIGHT - ok_h);
                let at = first + i as i64 * 60_000;
                let hhmm = chrono::DateTime::from_timestamp_millis(at)
                    .unwrap_or_default()
                    .format("%H:%M UTC");
                Bar {
                    x: i as u32 * WIDTH,
                    ok_y: HEIGHT - ok_h,
                    ok_h,
                    fail_y: HEIGHT - ok_h - fail_h,
                    fail_h,
                    title: format!(
                        "{hhmm}: {} processed, {} failed, {} retried, {} enqueued",
                        m.processed, m.failed, m.retried, m.enqueued
                    ),
                }
            })
            .collect();
        Chart {
            bars,
            width: MINUTES * WIDTH,
            height: HEIGHT,
            processed: minutes.iter().map(|m| m.processed).sum(),
            failed: minutes.iter().map(|m| m.failed).sum(),
            enqueued: minutes.iter().map(|m| m.enqueued).sum(),
            peak,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minute(minute_ms: i64, processed: u64, failed: u64) -> MinuteCounts {
        // Non-exhaustive: built from its default.
        let mut m = MinuteCounts::default();
        m.minute_ms = minute_ms;
        m.processed = processed;
        m.failed = failed;
        m
    }

    #[test]
    fn minutes_land_in_their_bars_scaled_to_the_peak() {
        let now = 1_700_000_000_000 + 30_000; // half a minute into a minute
        let this = now - now % 60_000;
        let history = [
            minute(this - 120 * 60_000, 999, 0), // older than the hour: left out
            minute(this - 59 * 60_000, 10, 0),   // the first bar
            minute(this - 60_000, 20, 20),       // the peak, half failed
            minute(this, 1, 0),                  // this minute: the last bar
        ];
        let chart = Chart::new(&history, now);
        assert_eq!(chart.bars.len(), MINUTES as usize);
        assert_eq!((chart.processed, chart.failed, chart.peak), (31, 20, 40));
        let first = &chart.bars[0];
        assert_eq!((first.ok_h, first.fail_h), (HEIGHT / 4, 0));
        let peak = &chart.bars[58];
        assert_eq!((peak.ok_h, peak.fail_h), (HEIGHT / 2, HEIGHT / 2));
        assert_eq!(peak.fail_y, 0);
        let last = &chart.bars[59];
        assert_eq!(last.ok_h, 1, "anything that happened gets a pixel");
        assert!(chart.bars[1..58]
            .iter()
            .all(|b| b.ok_h == 0 && b.fail_h == 0));
    }
}
