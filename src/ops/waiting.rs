//! What a waiting job waits for, as operators see it: its parents by topic name and partition
//! ([`JobDetail::parents`]), and its why line naming them.

use serde::Serialize;

use super::JobDetail;
use crate::client::JobState;
use crate::partition::split_store_topic;
use crate::store::ParentRef;

/// A job that a waiting job waits for (see [`JobDetail::parents`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct JobParent {
    /// Its topic's name.
    pub topic: String,
    /// Its partition (0 for a topic of one partition).
    pub partition: u16,
    /// Its id.
    pub id: String,
}

impl JobParent {
    fn new(p: &ParentRef) -> Self {
        let (topic, partition) = split_store_topic(&p.topic);
        JobParent {
            topic: topic.to_owned(),
            partition,
            id: p.id.clone(),
        }
    }
}

impl JobDetail {
    /// The jobs a waiting job still waits for ([`JobState::Waiting`]), by topic name, in the order
    /// its enqueue gave them; empty in every other state.
    pub fn parents(&self) -> Vec<JobParent> {
        match &self.state {
            JobState::Waiting { waiting_for } => waiting_for
                .iter()
                .map(|(topic, id)| JobParent::new(&ParentRef::new(topic.as_str(), id.as_str())))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// A waiting job's why line ([`JobDetail::why`]): the parents it waits for (the first five), and what it waits for them to
/// do.
pub(super) fn why(parents: &[ParentRef]) -> String {
    let names: Vec<String> = parents
        .iter()
        .take(5)
        .map(|p| {
            let p = JobParent::new(p);
            format!("{}/{}", p.topic, p.id)
        })
        .collect();
    match parents.len() {
        0 => "waiting for its parents' ends to be delivered: it becomes due then".to_owned(),
        1 => format!(
            "waiting for {}: it becomes due once that job succeeds",
            names[0]
        ),
        n => {
            let more = match n - names.len() {
                0 => String::new(),
                rest => format!(" and {rest} more"),
            };
            format!(
                "waiting for {}{more}: it becomes due once they all succeed",
                names.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::why;
    use crate::store::ParentRef;

    #[test]
    fn a_waiting_jobs_why_line_names_its_parents_by_topic() {
        let one = [ParentRef::new("payments.charge#3", "charge:7")];
        assert_eq!(
            why(&one),
            "waiting for payments.charge/charge:7: it becomes due once that job succeeds"
        );
        let two = [
            ParentRef::new("payments.charge", "charge:7"),
            ParentRef::new("stock.reserve", "order:7"),
        ];
        assert_eq!(
            why(&two),
            "waiting for payments.charge/charge:7, stock.reserve/order:7: it becomes due once they \
             all succeed"
        );
        let many: Vec<ParentRef> = (0..8)
            .map(|n| ParentRef::new("a", format!("p{n}")))
            .collect();
        assert_eq!(
            why(&many),
            "waiting for a/p0, a/p1, a/p2, a/p3, a/p4 and 3 more: it becomes due once they all succeed"
        );
    }
}
