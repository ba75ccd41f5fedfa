//! Periodic schedules in the operations API: list them (one topic, or every registered topic), run one
//! now, remove one.

use chrono::{DateTime, Utc};
use futures_util::future::join_all;

use super::Ops;
use crate::client::ScheduleInfo;
use crate::error::Result;

impl Ops {
    /// A topic's periodic schedules (name, expression, zone, policies, next and last tick): see
    /// [`Topic::schedules`](crate::Topic::schedules). The topic need not be registered.
    pub async fn schedules(&self, topic: &str) -> Result<Vec<ScheduleInfo>> {
        self.client.topic_named(topic)?.schedules().await
    }

    /// The periodic schedules of every registered topic (a worker registers the topics of the
    /// schedules it runs), as (topic, schedule), by topic then name.
    pub async fn all_schedules(&self) -> Result<Vec<(String, ScheduleInfo)>> {
        let topics = self.registered().await?;
        let lists = topics.into_iter().map(|(name, _)| async move {
            let list = self.schedules(&name).await?;
            Ok::<_, crate::Error>(list.into_iter().map(move |s| (name.clone(), s)))
        });
        let mut out = Vec::new();
        for list in join_all(lists).await {
            out.extend(list?);
        }
        out.sort_by(|a, b| (&a.0, &a.1.name).cmp(&(&b.0, &b.1.name)));
        Ok(out)
    }

    /// Runs a schedule now: see [`Topic::trigger_schedule`](crate::Topic::trigger_schedule). `None`
    /// when the topic has no such schedule.
    pub async fn trigger_schedule(&self, topic: &str, name: &str) -> Result<Option<DateTime<Utc>>> {
        self.client.topic_named(topic)?.trigger_schedule(name).await
    }

    /// Removes a schedule: see [`Topic::remove_schedule`](crate::Topic::remove_schedule).
    pub async fn remove_schedule(&self, topic: &str, name: &str) -> Result<bool> {
        self.client.topic_named(topic)?.remove_schedule(name).await
    }
}
