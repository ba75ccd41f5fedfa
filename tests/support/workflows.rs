//! Jobs that wait for jobs, seeded through the store, for the tests of what operators see of them (the
//! operations API, the `postpone` command, the dashboard): parents due in an hour (so nothing runs
//! them), waiters enqueued by `enqueue_after`, each topic registered as a client would.

use postpone::store::{
    AfterOutcome, Due, EnqueueOutcome, JobStore, NewJob, OnParentFailure, OpsStore, ParentRef,
    WorkflowStore,
};

use super::batches::record;

/// Job `id`, due as said, whose payload is `{"id": <its id>}`.
fn new_job(id: &str, due: Due) -> NewJob {
    let payload = serde_json::json!({ "id": id }).to_string();
    NewJob::new(id.to_owned(), record(&payload), due, false)
}

/// Registers the topic a store topic belongs to (with `p + 1` partitions for `<topic>#<p>`).
async fn register<S: OpsStore>(store: &S, topic: &str) {
    let (name, partitions) = match topic.split_once('#') {
        Some((name, p)) => (name, p.parse::<u16>().expect("a partition") + 1),
        None => (topic, 1),
    };
    store
        .register_topic(name, partitions)
        .await
        .expect("register_topic");
}

/// Enqueues parent `id` into store topic `topic`, due in an hour; panics unless it is new.
pub async fn parent<S: JobStore + OpsStore>(store: &S, topic: &str, id: &str) {
    register(store, topic).await;
    let out = store
        .enqueue(topic, vec![new_job(id, Due::In(3_600_000))])
        .await
        .expect("enqueue");
    assert!(
        matches!(out[..], [EnqueueOutcome::Created { .. }]),
        "{out:?}"
    );
}

/// Enqueues job `id` into `topic` to wait for `parents` (store topic, id), dead-lettered should one
/// die; panics unless it waits.
pub async fn waiting<S: WorkflowStore + OpsStore>(
    store: &S,
    topic: &str,
    id: &str,
    parents: &[(&str, &str)],
) {
    register(store, topic).await;
    let parents = parents
        .iter()
        .map(|(t, p)| ParentRef::new(*t, *p))
        .collect();
    let job = new_job(id, Due::In(0));
    let out = store
        .enqueue_after(topic, job, parents, OnParentFailure::DeadLetter)
        .await
        .expect("enqueue_after");
    assert!(matches!(out, AfterOutcome::Waiting { .. }), "{id}: {out:?}");
}
