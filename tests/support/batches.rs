//! Batches seeded through the store, for the tests of what operators see of them (the `postpone`
//! command, the dashboard): members and callbacks enqueued by `batch_create`, members ended by a
//! claim and a finish (or a cancel), their ends delivered to their batches by `deliver_ends`.

use postpone::store::{
    BatchCreated, BatchJob, CallbackKind, ClaimRequest, Due, Finish, FinishItem, JobStore,
    NewBatch, NewJob, WorkerStore, WorkflowStore,
};

/// A job record as the library encodes one (format version 2, no flags, attempt 1, enqueued at the
/// epoch) around a JSON payload, so that a member's job page can show it.
pub fn record(payload: &str) -> Vec<u8> {
    let mut out = vec![2 << 4, 1, 0];
    out.extend_from_slice(payload.as_bytes());
    out
}

/// A job of `topic` (a member or a callback), due now, whose payload is `{"id": <its id>}`.
pub fn job(topic: &str, id: &str) -> BatchJob {
    let payload = serde_json::json!({ "id": id }).to_string();
    BatchJob::new(
        topic,
        NewJob::new(id.to_owned(), record(&payload), Due::In(0), false),
    )
}

/// Creates batch `id` (closed when `close`) with `members` (topic, id) and `callbacks` (kind, topic,
/// id); panics unless it is new.
pub async fn create<S: WorkflowStore>(
    store: &S,
    id: &str,
    description: &str,
    members: &[(&str, &str)],
    callbacks: &[(CallbackKind, &str, &str)],
    close: bool,
) {
    let mut batch = NewBatch::default();
    batch.description = description.to_owned();
    batch.jobs = members.iter().map(|(t, m)| job(t, m)).collect();
    batch.callbacks = callbacks
        .iter()
        .map(|(kind, t, c)| (*kind, job(t, c)))
        .collect();
    batch.close = close;
    let created = store.batch_create(id, batch).await.expect("batch_create");
    assert_eq!(created, BatchCreated::Created, "batch {id}");
}

/// How a test ends a member.
#[derive(Debug, Clone, Copy)]
pub enum End {
    /// Its handler succeeded.
    Succeed,
    /// It died, with this reason.
    Die(&'static str),
    /// It was cancelled while due.
    Cancel,
}

/// Ends the listed jobs of `topic` (due now) as said, puts back any other due job it claimed (due in
/// an hour), then delivers the ends to their batches.
pub async fn end<S: JobStore + WorkerStore + WorkflowStore>(
    store: &S,
    topic: &str,
    ends: &[(&str, End)],
) {
    for (id, e) in ends {
        if let End::Cancel = e {
            store.cancel(topic, id).await.expect("cancel");
        }
    }
    let claimed = store
        .claim(topic, ClaimRequest::new(1000, 30_000, 0, 3))
        .await
        .expect("claim");
    let items: Vec<FinishItem> = claimed
        .jobs
        .into_iter()
        .map(|j| {
            let finish = match ends.iter().find(|(id, _)| *id == j.id).map(|(_, e)| *e) {
                Some(End::Succeed) => Finish::Done,
                Some(End::Die(reason)) => Finish::Dead {
                    record: j.record,
                    reason: reason.to_owned(),
                },
                _ => Finish::Retry {
                    record: j.record,
                    delay_ms: 3_600_000,
                    counted: false,
                },
            };
            FinishItem::new(j.id, j.token, finish)
        })
        .collect();
    store.finish(topic, items).await.expect("finish");
    while store.deliver_ends(topic, 1000).await.expect("deliver_ends") > 0 {}
}
