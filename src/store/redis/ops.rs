//! [`OpsStore`] on Redis: the namespace's registries of topics and workers (`registry.lua`), jobs listed
//! by state (`page.lua`, with outcomes.lua for kept finished jobs; `find_prefix.lua`), pause
//! (`set_paused.lua`) and history (`history.lua`).

use async_trait::async_trait;
use redis::Value;

use super::keys;
use super::reply::Reply;
use super::scripts::SCRIPTS;
use super::RedisStore;
use crate::error::{Error, Result};
use crate::store::{
    Death, Kept, KeyLoad, KeysPage, MinuteCounts, OpsStore, PageEntry, PageQuery, PageState,
    PrefixPage, WorkerBeat, HISTORY_MINUTES,
};

/// Most entries one page or search step returns (bounds the script's run time).
const PAGE_CAP: usize = 1000;

fn state_arg(state: PageState) -> &'static str {
    match state {
        PageState::Scheduled => "due",
        PageState::Waiting => "waiting",
        PageState::Running => "active",
        PageState::Dead => "dead",
        PageState::Done => "done",
    }
}

/// A key for fairness as the scripts reply it (`''`: none).
pub(super) fn key_text(key: &[u8]) -> Option<String> {
    (!key.is_empty()).then(|| String::from_utf8_lossy(key).into_owned())
}

/// Key `key`'s load as the scripts reply it: jobs queued, running, held until (ms, 0: not held), its
/// own limits' label (`''`: none).
pub(super) fn key_load(r: &mut Reply, key: String) -> Result<KeyLoad> {
    let (queued, running, held) = (r.int()?, r.int()?, r.int()?);
    let own = String::from_utf8_lossy(&r.bytes()?).into_owned();
    Ok(KeyLoad {
        key,
        queued: queued.max(0) as u64,
        running: running.max(0) as u64,
        held_until_ms: (held > 0).then_some(held),
        own_limits: crate::flow::KeyLimits::from_label(&own),
    })
}

/// Reads page.lua's seven fields per entry (a kept finished job's record and end are in its info: the
/// stored value that [`Kept::parse`] reads; one whose value is gone meanwhile is left out).
fn page_entries(r: &mut Reply, state: PageState) -> Result<Vec<PageEntry>> {
    let mut out = Vec::with_capacity(r.remaining() / 7);
    while r.remaining() > 0 {
        let member = r.bytes()?;
        let score = r.int()?;
        let record = r.bytes()?;
        let stalls = u32::try_from(r.int()?.max(0)).unwrap_or(u32::MAX);
        let holder = u64::try_from(r.int()?).ok().filter(|h| *h != 0);
        let info = r.bytes()?;
        let key = key_text(&r.bytes()?);
        let (id, death, record, ended) = match state {
            PageState::Dead => {
                let Some(Death { id, seq }) = Death::parse(&member) else {
                    continue;
                };
                let (_, reason) = super::dead::parse_info(&info);
                (id, Some((seq, reason)), record, None)
            }
            PageState::Done => {
                let (Ok(id), Some(kept)) = (String::from_utf8(member), Kept::parse(&info)) else {
                    continue;
                };
                let ended = kept.ended();
                (id, None, kept.record, Some(ended))
            }
            _ => match String::from_utf8(member) {
                Ok(id) => (id, None, record, None),
                Err(_) => continue,
            },
        };
        out.push(PageEntry {
            id,
            score,
            record,
            stalls,
            holder,
            death,
            ended,
            key,
        });
    }
    Ok(out)
}

impl RedisStore {
    async fn outboxes(&self, context: &'static str, args: &[&str]) -> Result<Value> {
        let key = [keys::outboxes(&self.inner.namespace)];
        self.eval_with(context, &SCRIPTS.outboxes, &key, |inv| {
            for a in args {
                inv.arg(*a);
            }
        })
        .await
    }

    async fn registry(&self, context: &'static str, args: &[&str]) -> Result<Value> {
        self.eval_with(context, &SCRIPTS.registry, &self.inner.registries, |inv| {
            for a in args {
                inv.arg(*a);
            }
        })
        .await
    }
}

#[async_trait]
impl OpsStore for RedisStore {
    async fn register_topic(&self, topic: &str, partitions: u16) -> Result<()> {
        crate::validate::validate_topic(topic)?;
        let partitions = partitions.max(1).to_string();
        self.registry("registering a topic", &["topic", topic, &partitions])
            .await?;
        Ok(())
    }

    async fn topics(&self) -> Result<Vec<(String, u16)>> {
        const CONTEXT: &str = "listing topics";
        let all: Vec<(String, String)> = self
            .command(
                CONTEXT,
                redis::cmd("HGETALL").arg(&self.inner.registries[0]),
            )
            .await?;
        let mut out: Vec<(String, u16)> = all
            .into_iter()
            .map(|(name, n)| (name, n.parse().unwrap_or(1)))
            .collect();
        out.sort();
        Ok(out)
    }

    async fn set_paused(&self, topic: &str, paused: bool) -> Result<()> {
        const CONTEXT: &str = "pausing or resuming a topic";
        let keys = self.keys(topic)?;
        self.eval(CONTEXT, &SCRIPTS.set_paused, &keys, |inv| {
            inv.arg(if paused { "1" } else { "0" })
                .arg(&self.inner.channel)
                .arg(topic);
        })
        .await?;
        Ok(())
    }

    async fn worker_beat(&self, id: &str, info: &str, ttl_ms: u64) -> Result<()> {
        let ttl = ttl_ms.clamp(1, i64::MAX as u64 / 4).to_string();
        self.registry("writing the worker's heartbeat", &["beat", id, info, &ttl])
            .await?;
        Ok(())
    }

    async fn worker_gone(&self, id: &str) -> Result<()> {
        self.registry("removing the worker's entry", &["gone", id])
            .await?;
        Ok(())
    }

    async fn outbox_report(&self, name: &str, report: &str, ttl_ms: u64) -> Result<()> {
        let ttl = ttl_ms.clamp(1, i64::MAX as u64 / 4).to_string();
        self.outboxes("recording an outbox report", &["put", name, report, &ttl])
            .await?;
        Ok(())
    }

    async fn outbox_reports(&self) -> Result<Vec<(String, i64, String)>> {
        const CONTEXT: &str = "listing outbox reports";
        let reply = self.outboxes(CONTEXT, &["list"]).await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let mut out = Vec::with_capacity(r.remaining() / 3);
        while r.remaining() > 0 {
            let (name, at, report) = (r.bytes()?, r.int()?, r.bytes()?);
            out.push((
                String::from_utf8_lossy(&name).into_owned(),
                at,
                String::from_utf8_lossy(&report).into_owned(),
            ));
        }
        out.sort();
        Ok(out)
    }

    async fn workers(&self) -> Result<Vec<WorkerBeat>> {
        const CONTEXT: &str = "listing workers";
        let reply = self.registry(CONTEXT, &["workers"]).await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let mut out = Vec::with_capacity(r.remaining() / 3);
        while r.remaining() > 0 {
            let (id, expires_at_ms, entry) = (r.bytes()?, r.int()?, r.bytes()?);
            let entry = String::from_utf8_lossy(&entry);
            let (beat, info) = entry.split_once(' ').unwrap_or(("0", ""));
            out.push(WorkerBeat {
                id: String::from_utf8_lossy(&id).into_owned(),
                info: info.to_owned(),
                beat_at_ms: beat.parse().unwrap_or(0),
                expires_at_ms,
            });
        }
        Ok(out)
    }

    async fn page(&self, topic: &str, query: &PageQuery) -> Result<Vec<PageEntry>> {
        const CONTEXT: &str = "listing jobs";
        let keys = self.keys(topic)?;
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.page, keys.with_outcomes(), |inv| {
                inv.arg(state_arg(query.state))
                    .arg(if query.newest_first { "desc" } else { "asc" })
                    .arg(query.limit.min(PAGE_CAP));
                if let Some(after) = &query.after {
                    inv.arg(after.score).arg(&after.member);
                }
            })
            .await?;
        page_entries(&mut Reply::new(reply, CONTEXT)?, query.state)
    }

    async fn find_prefix(
        &self,
        topic: &str,
        state: PageState,
        prefix: &str,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<PrefixPage> {
        const CONTEXT: &str = "searching jobs by id prefix";
        let keys = self.keys(topic)?;
        if state == PageState::Done {
            return Ok(PrefixPage::default());
        }
        let reply = self
            .eval_with(CONTEXT, &SCRIPTS.find_prefix, keys.with_outcomes(), |inv| {
                inv.arg(state_arg(state))
                    .arg(prefix)
                    .arg(cursor.unwrap_or(""))
                    .arg(limit.clamp(1, PAGE_CAP));
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let next = String::from_utf8(r.bytes()?).map_err(|e| Error::backend(CONTEXT, e))?;
        Ok(PrefixPage {
            entries: page_entries(&mut r, state)?,
            next: (!next.is_empty()).then_some(next),
        })
    }

    fn node_of(&self, topic: &str) -> Option<String> {
        let keys = self.keys(topic).ok()?;
        self.inner.health.as_ref()?.node_of(&keys.0[0])
    }

    async fn busiest_keys(&self, topic: &str, limit: usize, sample: usize) -> Result<KeysPage> {
        const CONTEXT: &str = "listing a topic's keys";
        let keys = self.keys(topic)?;
        let reply = self
            .eval(CONTEXT, &SCRIPTS.fair_keys, &keys, |inv| {
                inv.arg(limit.clamp(1, 10_000)).arg(sample.clamp(1, 10_000));
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let total = r.int()?.max(0) as u64;
        let sampled = r.int()? == 1;
        let running_counted = r.int()? == 1;
        let limits = crate::flow::KeyLimits::from_label(&String::from_utf8_lossy(&r.bytes()?));
        let mut out = Vec::with_capacity(r.remaining() / 5);
        while r.remaining() > 0 {
            let key = String::from_utf8_lossy(&r.bytes()?).into_owned();
            out.push(key_load(&mut r, key)?);
        }
        Ok(KeysPage {
            keys: out,
            total,
            sampled,
            running_counted,
            limits,
        })
    }

    async fn set_key_limits(
        &self,
        topic: &str,
        key: &str,
        limits: Option<crate::KeyLimits>,
    ) -> Result<()> {
        const CONTEXT: &str = "setting a key's limits";
        let keys = self.keys(topic)?;
        self.eval(CONTEXT, &SCRIPTS.key_limits, &keys, |inv| {
            inv.arg(if limits.is_some() { "set" } else { "clear" })
                .arg(&self.inner.channel)
                .arg(topic)
                .arg(key);
            if let Some(limits) = limits {
                // The claim's arguments for limits per key (worker.rs), and their label.
                let (interval, burst) = match limits.rate_per_key() {
                    Some(rate) => (format!("{:.6}", rate.interval_ms()), rate.burst()),
                    None => ("0".to_owned(), 1),
                };
                inv.arg(format!(
                    "{} {interval} {burst} {}",
                    limits.max_running_per_key(),
                    limits.label()
                ));
            }
        })
        .await?;
        Ok(())
    }

    async fn key_limits(&self, topic: &str) -> Result<Vec<(String, crate::KeyLimits)>> {
        const CONTEXT: &str = "listing the keys with limits of their own";
        let keys = self.keys(topic)?;
        let reply = self
            .eval(CONTEXT, &SCRIPTS.key_limits, &keys, |inv| {
                inv.arg("list").arg(&self.inner.channel).arg(topic);
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let mut out = Vec::with_capacity(r.remaining() / 2);
        while r.remaining() > 0 {
            let key = String::from_utf8_lossy(&r.bytes()?).into_owned();
            let label = String::from_utf8_lossy(&r.bytes()?).into_owned();
            let limits = crate::KeyLimits::from_label(&label).ok_or_else(|| {
                Error::backend(
                    CONTEXT,
                    format!("a stored label that is no limits: {label:?}"),
                )
            })?;
            out.push((key, limits));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    async fn history(&self, topic: &str, minutes: u32) -> Result<Vec<MinuteCounts>> {
        const CONTEXT: &str = "reading a topic's history";
        let keys = self.keys(topic)?;
        let minutes = i64::from(minutes).clamp(0, HISTORY_MINUTES);
        let reply = self
            .eval(CONTEXT, &SCRIPTS.history, &keys, |inv| {
                inv.arg(minutes);
            })
            .await?;
        let mut r = Reply::new(reply, CONTEXT)?;
        let mut out = Vec::with_capacity(r.remaining() / 6);
        while r.remaining() > 0 {
            let minute_ms = r.int()?;
            let mut n = [0u64; 5];
            for v in &mut n {
                *v = r.int()?.max(0) as u64;
            }
            out.push(MinuteCounts {
                minute_ms,
                enqueued: n[0],
                processed: n[1],
                retried: n[2],
                failed: n[3],
                dead: n[4],
            });
        }
        Ok(out)
    }

    async fn script_libraries(&self, prune: bool) -> Result<crate::store::ScriptLibraries> {
        self.libraries(prune).await
    }

    async fn doctor(&self) -> Result<Vec<crate::check::Check>> {
        self.doctor_checks().await
    }
}
