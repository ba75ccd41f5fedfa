//! The workers' event log: one line per event (see `examples/fault_worker.rs`), read back as [`Event`]s.

use std::path::Path;

/// One line of the event log.
#[derive(Debug, Clone)]
pub enum Event {
    Ready {
        pid: u32,
        redis_ms: i64,
        local_ms: i64,
    },
    Claim {
        id: String,
        token: u64,
        pid: u32,
        ms: i64,
        due_ms: i64,
    },
    Start {
        id: String,
        attempt: u32,
        pid: u32,
        ms: i64,
        due_ms: i64,
    },
    Finish {
        id: String,
        attempt: u32,
        pid: u32,
        ms: i64,
    },
    Fail {
        id: String,
        attempt: u32,
        pid: u32,
    },
    Ack {
        id: String,
        token: u64,
        pid: u32,
        kind: String,
        outcome: String,
    },
    Dead {
        id: String,
        pid: u32,
        reason: String,
    },
    Crash {
        point: String,
        pid: u32,
        local_ms: i64,
    },
    /// A claim about to be sent (its reply, with jobs, is `Claim` lines; without, `Replied`).
    Claiming {
        token: u64,
        pid: u32,
        local_ms: i64,
    },
    /// A claim's reply that took no job.
    Replied {
        token: u64,
        pid: u32,
    },
}

impl Event {
    pub fn is_ready(&self, p: u32) -> bool {
        matches!(self, Event::Ready { pid, .. } if *pid == p)
    }

    pub fn is_start_of(&self, job: &str, p: u32) -> bool {
        matches!(self, Event::Start { id, pid, .. } if id == job && *pid == p)
    }
}

/// Undoes the worker's percent-encoding.
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).expect("hex");
            out.push(u8::from_str_radix(hex, 16).expect("percent escape"));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).expect("utf-8 id")
}

fn parse(line: &str) -> Event {
    let f: Vec<&str> = line.split(' ').collect();
    let n = |i: usize| -> i64 {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("bad event line {line:?}"))
    };
    let s = |i: usize| -> String { unescape(f.get(i).expect("field")) };
    match f[0] {
        "ready" => Event::Ready {
            pid: n(1) as u32,
            redis_ms: n(2),
            local_ms: n(3),
        },
        "claim" => Event::Claim {
            id: s(1),
            token: n(2) as u64,
            pid: n(3) as u32,
            ms: n(4),
            due_ms: n(5),
        },
        "start" => Event::Start {
            id: s(1),
            attempt: n(2) as u32,
            pid: n(3) as u32,
            ms: n(4),
            due_ms: n(5),
        },
        "finish" => Event::Finish {
            id: s(1),
            attempt: n(2) as u32,
            pid: n(3) as u32,
            ms: n(4),
        },
        "fail" => Event::Fail {
            id: s(1),
            attempt: n(2) as u32,
            pid: n(3) as u32,
        },
        "ack" => Event::Ack {
            id: s(1),
            token: n(2) as u64,
            pid: n(3) as u32,
            kind: f[4].to_owned(),
            outcome: f[5].to_owned(),
        },
        "dead" => Event::Dead {
            id: s(1),
            pid: n(2) as u32,
            reason: s(3),
        },
        "claiming" => Event::Claiming {
            token: n(1) as u64,
            pid: n(2) as u32,
            local_ms: n(3),
        },
        "replied" => Event::Replied {
            token: n(1) as u64,
            pid: n(2) as u32,
        },
        "crash" => Event::Crash {
            point: f[1].to_owned(),
            pid: n(2) as u32,
            local_ms: n(3),
        },
        _ => panic!("unknown event line {line:?}"),
    }
}

/// Reads the log: every process's file in `dir`. A file whose last line has no newline belongs to a
/// process killed in the middle of that write: the torn line is dropped; every other line must parse.
pub fn read_log(dir: &Path) -> Vec<Event> {
    let mut events = Vec::new();
    for entry in std::fs::read_dir(dir).expect("reading the event log directory") {
        let path = entry.expect("log entry").path();
        let text = std::fs::read_to_string(&path).expect("reading an event log");
        let whole = match text.rfind('\n') {
            Some(end) => &text[..=end],
            None => "",
        };
        events.extend(whole.lines().filter(|l| !l.is_empty()).map(parse));
    }
    events
}
