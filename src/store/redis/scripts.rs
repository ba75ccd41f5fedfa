//! The Lua scripts: one per state change, each loaded with `include_str!` behind a shared prelude, and
//! each also a function library: run with FCALL (the library loaded on "Function not found"), or on a
//! Redis without functions with EVALSHA, falling back to EVAL (which also caches the script) on
//! NOSCRIPT: see `exec.rs`.

use std::sync::LazyLock;

/// What every script starts with: keys, constants, time, hints, history.
const PRELUDE_CORE: &str = include_str!("scripts/prelude_core.lua");
/// What every script but the single enqueue adds: leases, deaths, listings, priorities. Each function a
/// script's source defines is a closure made at every call, so the hottest script leaves these out.
const PRELUDE: &str = include_str!("scripts/prelude.lua");
/// Fairness by key: the helpers, made only when a script needs them (see fair.lua).
const FAIR: &str = include_str!("scripts/fair.lua");
/// Finished jobs kept, waiters and progress, after the prelude, for the scripts that end jobs or read
/// outcomes (they get the five keys of `TopicKeys::with_outcomes`).
const OUTCOMES: &str = include_str!("scripts/outcomes.lua");
/// The keys for fairness of jobs as operators see them (job, page, find_prefix, fair_keys).
const FAIR_LISTED: &str = include_str!("scripts/fair_listed.lua");
/// Jobs waiting for jobs, after outcomes.lua (their keys are three more of `TopicKeys::with_outcomes`).
const DEPS: &str = include_str!("scripts/deps.lua");
/// The batch scripts' helpers, after the core of the prelude (their keys are a batch's, not a topic's).
const BATCH: &str = include_str!("scripts/batch_prelude.lua");
/// The periodic scripts' helpers, after the prelude.
const PERIODIC: &str = include_str!("scripts/periodic_prelude.lua");

/// A script: its source for EVAL and its SHA1 (the EVALSHA name), and the same code as a function
/// library for FUNCTION LOAD and its function's name (for FCALL): see `exec.rs`.
pub(super) struct Script {
    pub(super) source: String,
    pub(super) sha1: String,
    /// `postpone_<sha1>`: the library's name and its one function's.
    pub(super) function: String,
    /// The library: the prelude's functions made once, when Redis loads it, not at every call.
    pub(super) library: String,
}

/// Whether a script may run while Redis is over its `maxmemory`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Memory {
    /// It adds jobs: refused up front when Redis is full (FCALL of a function without `allow-oom`).
    Grows,
    /// It moves, ends, reads or removes: it runs when Redis is full (`allow-oom`), so that workers
    /// drain a full Redis.
    Drains,
}

/// The prelude's parts a script runs behind, in this order, and its body.
struct Spec {
    pieces: &'static [&'static str],
    body: String,
    memory: Memory,
}

impl Spec {
    /// The script that adds jobs: refused by a full Redis.
    fn grows(mut self) -> Spec {
        self.memory = Memory::Grows;
        self
    }
}

const FULL: &[&str] = &[PRELUDE_CORE, PRELUDE, FAIR];

fn spec(pieces: &'static [&'static str], body: &str) -> Spec {
    Spec {
        pieces,
        body: body.to_owned(),
        memory: Memory::Drains,
    }
}

fn script(body: &str) -> Spec {
    spec(FULL, body)
}

/// A script that needs only the core of the prelude.
fn lean_script(body: &str) -> Spec {
    spec(&[PRELUDE_CORE], body)
}

/// A script that calls enqueue.lua's body as `enqueue_jobs(ARGV)`.
fn with_enqueue_jobs(body: &str) -> Spec {
    script(&format!(
        "local function enqueue_jobs(ARGV)\n{}\nend\n{body}",
        include_str!("scripts/enqueue.lua")
    ))
    .grows()
}

/// A script that ends jobs or reads outcomes: the prelude, outcomes.lua, the body.
fn with_outcomes(body: &str) -> Spec {
    spec(&[PRELUDE_CORE, PRELUDE, FAIR, OUTCOMES], body)
}

/// A script that shows jobs' keys for fairness: the prelude, outcomes.lua, fair_listed.lua, the body.
fn with_listed_keys(body: &str) -> Spec {
    spec(&[PRELUDE_CORE, PRELUDE, FAIR, OUTCOMES, FAIR_LISTED], body)
}

/// A script of jobs that wait for jobs: the prelude, outcomes.lua, deps.lua, the body.
fn with_deps(body: &str) -> Spec {
    spec(&[PRELUDE_CORE, PRELUDE, FAIR, OUTCOMES, DEPS], body)
}

/// A batch script: the core of the prelude, the batch helpers, the body (see batch_prelude.lua).
fn batch_script(body: &str) -> Spec {
    spec(&[PRELUDE_CORE, BATCH], body)
}

/// A periodic script: the prelude, the periodic helpers, the body.
fn periodic(body: &str) -> Spec {
    spec(&[PRELUDE_CORE, PRELUDE, FAIR, PERIODIC], body)
}

impl From<Spec> for Script {
    fn from(spec: Spec) -> Script {
        let mut source = String::new();
        for piece in spec.pieces {
            source.push_str(piece);
            source.push('\n');
        }
        source.push_str(&spec.body);
        let sha1 = redis::Script::new(&source).get_hash().to_owned();
        let function = format!("postpone_{sha1}");
        let library = library(&function, &spec);
        Script {
            source,
            sha1,
            function,
            library,
        }
    }
}

/// The function library of a script, named `name` (its one function is too).
///
/// A script's source makes every function of its prelude again at each call (Lua makes a closure for
/// each `local function`, an upvalue for each variable it captures); a library makes them once, when
/// Redis loads it, and each FCALL runs only the body. The prelude's lines at column 0 that read the
/// call's keys (`local K_DUE, ... = KEYS[1], ...`, and names made from them: their right side names
/// `KEYS` or a `K_` name) become declarations, assigned at each call by the piece's `bind` function
/// before the body runs; `KEYS` and `ARGV` are locals of the library the call sets first. Everything
/// else a piece keeps between calls is made from no key (the helper tables `P_` and `O`), or checks
/// the keys it was made for (`F`, in fair.lua).
fn library(name: &str, spec: &Spec) -> String {
    let mut lib = format!("#!lua name={name}\nlocal KEYS, ARGV\n");
    let mut binds = Vec::new();
    for (i, piece) in spec.pieces.iter().enumerate() {
        let mut assigns = String::new();
        for line in piece.lines() {
            match per_call(line) {
                Some((names, value)) => {
                    lib.push_str(&format!("local {names}\n"));
                    assigns.push_str(&format!("  {names} = {value}\n"));
                }
                None => push_code(&mut lib, line),
            }
        }
        if !assigns.is_empty() {
            lib.push_str(&format!("local function bind{i}()\n{assigns}end\n"));
            binds.push(format!("bind{i}()"));
        }
    }
    let flags = match spec.memory {
        Memory::Grows => "",
        Memory::Drains => "'allow-oom'",
    };
    lib.push_str(&format!(
        "redis.register_function{{function_name = '{name}', flags = {{ {flags} }}, \
         callback = function(keys, args)\nKEYS, ARGV = keys, args\n{}\n",
        binds.join(" "),
    ));
    for line in spec.body.lines() {
        push_code(&mut lib, line);
    }
    lib.push_str("end}\n");
    lib
}

/// Adds `line` to a library, but for a line of comment only its end: Redis keeps a library's code in
/// memory and compiles it on every node that loads it, and comments are 40 % of the scripts' bytes.
/// The line stays (empty), so Lua's errors name the lines of the source.
fn push_code(lib: &mut String, line: &str) {
    if !line.trim_start().starts_with("--") {
        lib.push_str(line);
    }
    lib.push('\n');
}

/// A prelude line that reads the call's keys: `local NAMES = VALUE` at column 0 whose value names
/// `KEYS` or a key made from them (`K_...`).
fn per_call(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("local ")?;
    if rest.starts_with("function ") {
        return None;
    }
    let (names, value) = rest.split_once(" = ")?;
    (value.contains("KEYS") || value.contains("K_")).then_some((names, value))
}

/// Every script of the backend (`SCRIPTS.claim`...), each built from its [`Spec`] when first used, once
/// per process: a process builds only the scripts it runs (a worker about a dozen of the fifty, a CLI
/// command one or two), as building one hashes its whole source (SHA-1 of 12 to 90 KB; all of them
/// took a worker some 57 million instructions, by callgrind).
macro_rules! scripts {
    ($($name:ident: $spec:expr,)*) => {
        /// Every script of the backend.
        pub(super) struct Scripts {
            $(pub(super) $name: LazyLock<Script>,)*
        }

        impl Scripts {
            /// Each script, by name (every one built).
            pub(super) fn all(&self) -> Vec<(&'static str, &Script)> {
                vec![$((stringify!($name), &*self.$name),)*]
            }
        }

        pub(super) static SCRIPTS: Scripts = Scripts {
            $($name: LazyLock::new(|| Script::from($spec)),)*
        };
    };
}

scripts! {
    enqueue: script(include_str!("scripts/enqueue.lua")).grows(),
    enqueue_one: spec(&[PRELUDE_CORE, FAIR], include_str!("scripts/enqueue_one.lua")).grows(),
    enqueue_plain: spec(&[PRELUDE_CORE, FAIR], include_str!("scripts/enqueue_plain.lua")).grows(),
    // enqueue.lua's body as a function of its arguments, for the jobs not delivered before, and for
    // the jobs whose keys let them through.
    enqueue_once: with_enqueue_jobs(include_str!("scripts/enqueue_once.lua")),
    enqueue_keyed: with_enqueue_jobs(include_str!("scripts/enqueue_keyed.lua")),
    claim: with_outcomes(include_str!("scripts/claim.lua")),
    finish: with_outcomes(include_str!("scripts/finish.lua")),
    extend: script(include_str!("scripts/extend.lua")),
    cancel: with_outcomes(include_str!("scripts/cancel.lua")),
    reschedule: script(include_str!("scripts/reschedule.lua")),
    job: with_listed_keys(include_str!("scripts/job.lua")),
    counts: with_outcomes(include_str!("scripts/counts.lua")),
    dead_list: script(include_str!("scripts/dead_list.lua")),
    dead_requeue: script(include_str!("scripts/dead_requeue.lua")),
    dead_purge: script(include_str!("scripts/dead_purge.lua")),
    dead_trim: script(include_str!("scripts/dead_trim.lua")),
    dead_of: script(include_str!("scripts/dead_of.lua")),
    dead_claim: script(include_str!("scripts/dead_claim.lua")),
    dead_ack: script(include_str!("scripts/dead_ack.lua")),
    dead_retry: script(include_str!("scripts/dead_retry.lua")),
    page: with_listed_keys(include_str!("scripts/page.lua")),
    find_prefix: with_listed_keys(include_str!("scripts/find_prefix.lua")),
    history: script(include_str!("scripts/history.lua")),
    fair_keys: spec(
        &[PRELUDE_CORE, PRELUDE, FAIR, FAIR_LISTED],
        include_str!("scripts/fair_keys.lua"),
    ),
    set_paused: script(include_str!("scripts/set_paused.lua")),
    key_limits: script(include_str!("scripts/key_limits.lua")),
    hold: script(include_str!("scripts/hold.lua")),
    registry: script(include_str!("scripts/registry.lua")),
    outboxes: lean_script(include_str!("scripts/outboxes.lua")),
    outcome: with_outcomes(include_str!("scripts/outcome.lua")),
    retain: with_outcomes(include_str!("scripts/retain.lua")),
    progress: with_outcomes(include_str!("scripts/progress.lua")),
    periodic_upsert: periodic(include_str!("scripts/periodic_upsert.lua")).grows(),
    periodic_tick: periodic(include_str!("scripts/periodic_tick.lua")).grows(),
    periodic_trigger: periodic(include_str!("scripts/periodic_trigger.lua")).grows(),
    periodic_list: periodic(include_str!("scripts/periodic_list.lua")),
    // enqueue_once.lua's body as a function of its arguments, wrapping enqueue.lua's likewise.
    enqueue_member: with_enqueue_jobs(&format!(
        "local function enqueue_once_jobs(ARGV)\n{}\nend\n{}",
        include_str!("scripts/enqueue_once.lua"),
        include_str!("scripts/enqueue_member.lua")
    )),
    batch_mark: lean_script(include_str!("scripts/batch_mark.lua")).grows(),
    batch_add: batch_script(include_str!("scripts/batch_add.lua")).grows(),
    batch_count: batch_script(include_str!("scripts/batch_count.lua")),
    batch_unstage: batch_script(include_str!("scripts/batch_unstage.lua")),
    batch_due: lean_script(include_str!("scripts/batch_due.lua")),
    ends_claim: lean_script(include_str!("scripts/ends_claim.lua")),
    ends_ack: lean_script(include_str!("scripts/ends_ack.lua")),
    dep_follow: with_outcomes(include_str!("scripts/dep_follow.lua")),
    dep_park: with_deps(include_str!("scripts/dep_park.lua")).grows(),
    dep_hear: with_deps(include_str!("scripts/dep_hear.lua")),
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    // Every script's library loads in a real Redis: Lua compiles its code only then (and refuses a
    // function with more than 60 upvalues, a chunk with more than 200 locals), so a script no test
    // calls would fail only in production. The server is started here, on a free port.
    #[test]
    fn every_function_library_loads() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
        let start = Instant::now();
        let mut conn = loop {
            match client.get_connection() {
                Ok(c) => break c,
                Err(e) if start.elapsed() > Duration::from_secs(10) => panic!("{e}"),
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let mut failed = Vec::new();
        for (name, script) in super::SCRIPTS.all() {
            let loaded: redis::RedisResult<String> = redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg(&script.library)
                .query(&mut conn);
            match loaded {
                Ok(lib) if lib == script.function => {}
                Ok(lib) => failed.push(format!("{name}: loaded as {lib}")),
                Err(e) => failed.push(format!("{name}: {e}")),
            }
        }
        server.kill().unwrap();
        server.wait().unwrap();
        assert!(failed.is_empty(), "{failed:#?}");
    }

    #[test]
    fn the_scripts_cap_due_times_like_the_seam() {
        let line = format!("local MAX_MS = {}\n", crate::store::MAX_DUE_MS);
        assert!(
            super::PRELUDE_CORE.contains(&line),
            "prelude_core.lua must say {line:?}"
        );
    }
}
