//! Handlers with their job types erased, so one worker can hold many.

use std::any::type_name;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::flow::Flow;
use crate::handler::{has_output, Handler, HandlerFuture, JobContext};
use crate::job::{Job, Keep};
use crate::schedule::RetrySchedule;

/// A registered handler, seen without its types.
pub(crate) trait ErasedHandler<S>: Send + Sync + 'static {
    fn topic(&self) -> &'static str;
    /// The job type's name, for decode errors.
    fn job_type(&self) -> &'static str;
    fn schedule(&self) -> &RetrySchedule;
    fn lease(&self) -> Option<Duration>;
    fn timeout(&self) -> Option<Duration>;
    fn partitions(&self) -> u16;
    /// The flow limits the job type declares (the whole topic's).
    fn flow(&self) -> Flow;
    /// How long the job type's finished jobs are kept.
    fn keep(&self) -> Option<Keep>;
    /// Whether the job type's handler returns a result (see [`has_output`]).
    fn has_output(&self) -> bool;
    /// Decodes the payload and starts the handler; a payload that does not decode is an error.
    fn start(
        &self,
        payload: &[u8],
        ctx: JobContext,
        state: &Arc<S>,
    ) -> Result<HandlerFuture, serde_json::Error>;
}

pub(crate) struct Registered<H, M> {
    handler: H,
    schedule: RetrySchedule,
    _marker: PhantomData<fn() -> M>,
}

impl<H, M> Registered<H, M> {
    pub(crate) fn new<S>(handler: H) -> Self
    where
        H: Handler<M, S>,
    {
        Registered {
            handler,
            schedule: H::Job::retry_schedule(),
            _marker: PhantomData,
        }
    }
}

impl<H, M, S> ErasedHandler<S> for Registered<H, M>
where
    H: Handler<M, S>,
    M: 'static,
    S: Send + Sync + 'static,
{
    fn topic(&self) -> &'static str {
        H::Job::TOPIC
    }

    fn job_type(&self) -> &'static str {
        type_name::<H::Job>()
    }

    fn schedule(&self) -> &RetrySchedule {
        &self.schedule
    }

    fn lease(&self) -> Option<Duration> {
        H::Job::lease()
    }

    fn timeout(&self) -> Option<Duration> {
        H::Job::timeout()
    }

    fn partitions(&self) -> u16 {
        H::Job::partitions()
    }

    fn flow(&self) -> Flow {
        Flow {
            rate: H::Job::rate_limit(),
            max_running: H::Job::max_running().unwrap_or(0),
            key: H::Job::key_limits(),
        }
    }

    fn keep(&self) -> Option<Keep> {
        H::Job::keep()
    }

    fn has_output(&self) -> bool {
        has_output::<H::Job>()
    }

    fn start(
        &self,
        payload: &[u8],
        ctx: JobContext,
        state: &Arc<S>,
    ) -> Result<HandlerFuture, serde_json::Error> {
        let job: H::Job = serde_json::from_slice(payload)?;
        Ok(self.handler.call(job, ctx, state))
    }
}
