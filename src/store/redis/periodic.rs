//! [`PeriodicStore`] on Redis: a topic's schedules in one hash beside its jobs,
//! `postpone:{<ns>:<topic>}:schedules` (name -> `"<next ms> <last ms|-> <trigger ms|-> <definition>"`),
//! in the topic's hash tag, so that a tick's script touches one slot: see `scripts/periodic_*.lua`.

use async_trait::async_trait;
use redis::Cmd;

use super::keys::TopicKeys;
use super::reply::Reply;
use super::scripts::{Script, SCRIPTS};
use super::RedisStore;
use crate::error::{Error, Result};
use crate::store::{
    PeriodicStore, StoredSchedule, TickOutcome, TickRequest, TickStatus, UpsertStatus,
};

/// The topic's keys, then its schedules hash (last: the scripts read it as `KEYS[#KEYS]`).
fn keys_with_schedules(keys: &TopicKeys) -> Vec<String> {
    let mut all = keys.0.to_vec();
    all.push(keys.other("schedules"));
    all
}

fn schedule(context: &'static str, name: &str, stored: &[u8]) -> Result<StoredSchedule> {
    std::str::from_utf8(stored)
        .ok()
        .and_then(|s| StoredSchedule::parse(name.to_owned(), s))
        .ok_or_else(|| Error::backend(context, format!("schedule {name:?} is not readable")))
}

impl RedisStore {
    async fn periodic_eval(
        &self,
        context: &'static str,
        script: &Script,
        topic: &str,
        args: impl Fn(&mut Cmd),
    ) -> Result<Reply> {
        let keys = keys_with_schedules(&*self.keys(topic)?);
        let reply = self.eval_with(context, script, &keys, args).await?;
        Reply::new(reply, context)
    }
}

#[async_trait]
impl PeriodicStore for RedisStore {
    async fn schedule_upsert(
        &self,
        topic: &str,
        name: &str,
        definition: &str,
        first_next_ms: i64,
    ) -> Result<(UpsertStatus, i64, StoredSchedule)> {
        const CONTEXT: &str = "storing a periodic schedule";
        let script = &SCRIPTS.periodic_upsert;
        let mut r = self
            .periodic_eval(CONTEXT, script, topic, |inv| {
                inv.arg(name).arg(definition).arg(first_next_ms);
            })
            .await?;
        let status = match r.int()? {
            1 => UpsertStatus::Created,
            2 => UpsertStatus::Unchanged,
            _ => UpsertStatus::Replaced,
        };
        let now = r.int()?;
        Ok((status, now, schedule(CONTEXT, name, &r.bytes()?)?))
    }

    async fn schedule_tick(&self, topic: &str, request: TickRequest) -> Result<TickOutcome> {
        const CONTEXT: &str = "deciding a periodic tick";
        let channel = &self.inner.channel;
        let mut r = self
            .periodic_eval(CONTEXT, &SCRIPTS.periodic_tick, topic, |inv| {
                inv.arg(channel)
                    .arg(topic)
                    .arg(&request.name)
                    .arg(&request.definition);
                match &request.trigger {
                    Some(t) => inv
                        .arg(t.tick_ms)
                        .arg(&t.id)
                        .arg(&t.record[..])
                        .arg(t.key.as_deref().unwrap_or("")),
                    None => inv.arg("").arg("").arg("").arg(""),
                };
                let Some(plan) = &request.plan else {
                    inv.arg("0");
                    return;
                };
                inv.arg("1").arg(plan.expect_next_ms);
                match &plan.expect_last {
                    Some((ms, id)) => inv.arg(*ms).arg(id),
                    None => inv.arg("-").arg(""),
                };
                inv.arg(plan.new_next_ms)
                    .arg(if plan.overlap_skip { "1" } else { "0" });
                match plan.grace_ms {
                    Some(ms) => inv.arg(ms),
                    None => inv.arg("-"),
                };
                for run in &plan.runs {
                    inv.arg(run.tick_ms)
                        .arg(&run.id)
                        .arg(&run.record[..])
                        .arg(run.key.as_deref().unwrap_or(""));
                }
            })
            .await?;
        let status = match r.int()? {
            0 => TickStatus::NoPlan,
            1 => TickStatus::Advanced,
            2 => TickStatus::Moved,
            3 => TickStatus::Early,
            4 => TickStatus::Behind,
            5 => TickStatus::Superseded,
            _ => TickStatus::Gone,
        };
        let now_ms = r.int()?;
        let enqueued = u32::try_from(r.int()?).unwrap_or(0);
        let stored = r.bytes()?;
        let schedule = match status {
            TickStatus::Gone => None,
            _ => Some(schedule(CONTEXT, &request.name, &stored)?),
        };
        Ok(TickOutcome {
            status,
            now_ms,
            schedule,
            enqueued,
        })
    }

    async fn schedules(&self, topic: &str) -> Result<(i64, Vec<StoredSchedule>)> {
        const CONTEXT: &str = "listing periodic schedules";
        let mut r = self
            .periodic_eval(CONTEXT, &SCRIPTS.periodic_list, topic, |_| {})
            .await?;
        let now = r.int()?;
        let mut out = Vec::with_capacity(r.remaining() / 2);
        while r.remaining() >= 2 {
            let name = String::from_utf8_lossy(&r.bytes()?).into_owned();
            out.push(schedule(CONTEXT, &name, &r.bytes()?)?);
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok((now, out))
    }

    async fn schedule_trigger(&self, topic: &str, name: &str) -> Result<Option<i64>> {
        const CONTEXT: &str = "triggering a periodic schedule";
        let channel = &self.inner.channel;
        let value = self
            .eval_with(
                CONTEXT,
                &SCRIPTS.periodic_trigger,
                &keys_with_schedules(&*self.keys(topic)?),
                |inv| {
                    inv.arg(channel).arg(topic).arg(name);
                },
            )
            .await?;
        let at = super::reply::as_int(&value)
            .ok_or_else(|| Error::backend(CONTEXT, "the script's reply is not an integer"))?;
        Ok((at >= 0).then_some(at))
    }

    async fn schedule_remove(&self, topic: &str, name: &str) -> Result<bool> {
        const CONTEXT: &str = "removing a periodic schedule";
        let keys = keys_with_schedules(&*self.keys(topic)?);
        let mut cmd = redis::cmd("HDEL");
        cmd.arg(&keys[keys.len() - 1]).arg(name);
        let removed: i64 = self.command(CONTEXT, &cmd).await?;
        Ok(removed > 0)
    }
}
