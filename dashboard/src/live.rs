//! Live figures by server-sent events: every topic's counts and the number of live workers, read once a
//! second and sent when they change. The script puts them into the elements marked `data-live`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::{self, Stream};
use postpone::ops::Ops;
use serde::Serialize;

/// How often the figures are read.
const EVERY: Duration = Duration::from_secs(1);

#[derive(Debug, Serialize, PartialEq)]
struct Figures {
    workers: usize,
    topics: BTreeMap<String, TopicFigures>,
}

#[derive(Debug, Serialize, PartialEq)]
struct TopicFigures {
    scheduled: u64,
    ready: u64,
    active: u64,
    dead: u64,
    processed: u64,
    failed: u64,
    paused: bool,
}

async fn read(ops: &Ops) -> postpone::Result<Figures> {
    let (topics, workers) = tokio::join!(ops.topics(), ops.workers());
    Ok(Figures {
        workers: workers?.len(),
        topics: topics?
            .into_iter()
            .map(|t| {
                let c = t.counts;
                let f = TopicFigures {
                    scheduled: c.scheduled,
                    ready: c.ready,
                    active: c.active,
                    dead: c.dead,
                    processed: c.processed,
                    failed: c.failed,
                    paused: c.paused,
                };
                (t.name, f)
            })
            .collect(),
    })
}

/// `events`: a `figures` event at once and whenever they change; an `error` event when the store
/// cannot be read (the stream goes on).
pub(crate) async fn events(
    State(shared): State<crate::State>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let ops = shared.ops.clone();
    let stream = stream::unfold(
        (ops, None::<Figures>, true),
        |(ops, mut last, first)| async move {
            loop {
                if !first || last.is_some() {
                    tokio::time::sleep(EVERY).await;
                }
                match read(&ops).await {
                    Ok(figures) if last.as_ref() != Some(&figures) => {
                        let event = Event::default()
                            .event("figures")
                            .json_data(&figures)
                            .unwrap_or_else(|_| {
                                Event::default().event("error").data("encoding failed")
                            });
                        last = Some(figures);
                        return Some((Ok(event), (ops, last, false)));
                    }
                    Ok(_) => {}
                    Err(e) => {
                        let event = Event::default().event("error").data(e.report().to_string());
                        // Next time round, send the figures again even if unchanged.
                        return Some((Ok(event), (ops, None, false)));
                    }
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}
