// Every handler form registers: (job, ctx), (job, ctx, state), closures, and JobHandler impls.
use postpone::{Client, Job, JobContext, JobError, JobHandler, Worker};

#[derive(serde::Serialize, serde::Deserialize, Job)]
#[job(topic = "a")]
struct A;

#[derive(serde::Serialize, serde::Deserialize, Job)]
#[job(topic = "b")]
struct B;

#[derive(serde::Serialize, serde::Deserialize, Job)]
#[job(topic = "c")]
struct C;

#[derive(Clone)]
struct Db;

async fn a(_: A, _: JobContext) -> Result<(), JobError> {
    Ok(())
}

async fn b(_: B, _: JobContext, _: Db) -> Result<(), JobError> {
    Ok(())
}

struct CHandler;

#[postpone::async_trait]
impl JobHandler<Db> for CHandler {
    type Job = C;
    async fn handle(&self, _: C, _: JobContext, _: &Db) -> Result<(), JobError> {
        Ok(())
    }
}

#[test]
fn compiles_and_runs() {
    let client = Client::memory();
    let worker = Worker::with_state(&client, Db)
        .handle(a)
        .handle(b)
        .handler(CHandler)
        .build();
    assert!(worker.is_ok());
    let closure = Worker::builder(&client)
        .handle(|_: A, _: JobContext| async { Ok::<(), JobError>(()) })
        .build();
    assert!(closure.is_ok());
}
