//! A PostgreSQL schema of the test's own, on the server at `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), dropped with everything in it when the test ends.
//!
//! Tests that need PostgreSQL fail, never skip, when it is not reachable: `.ci/run` installs and starts
//! it when it is not running.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The server the tests use.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|url| !url.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Connects to the test server, or panics with what to do.
pub async fn connect() -> tokio_postgres::Client {
    let url = database_url();
    let (client, connection) = match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
        Ok(c) => c,
        Err(e) => panic!(
            "PostgreSQL is not reachable at {url} ({e:?}), and this test needs it. `.ci/run` starts it; by \
             hand: `sudo apt-get install postgresql` then `sudo pg_ctlcluster --skip-systemctl-redirect \
             $(ls /etc/postgresql) main start`, with trust auth for 127.0.0.1 in pg_hba.conf, or set \
             DATABASE_URL to a server where user postgres may create schemas."
        ),
    };
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A schema named `<prefix>_<pid>_<n>`, with a connection whose `search_path` is that schema.
pub struct TestSchema {
    name: String,
    db: tokio_postgres::Client,
}

impl TestSchema {
    /// Creates the schema.
    pub async fn create(prefix: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!(
            "{prefix}_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        let db = connect().await;
        db.batch_execute(&format!("CREATE SCHEMA {name}; SET search_path TO {name}"))
            .await
            .unwrap_or_else(|e| panic!("creating schema {name}: {e:?}"));
        TestSchema { name, db }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A connection to it.
    pub fn db(&self) -> &tokio_postgres::Client {
        &self.db
    }

    /// Another connection to it, of the caller's own.
    pub async fn connect(&self) -> tokio_postgres::Client {
        let db = connect().await;
        db.batch_execute(&format!("SET search_path TO {}", self.name))
            .await
            .unwrap();
        db
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        // Drop cannot await: use a runtime of its own on a thread of its own.
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let db = connect().await;
                db.batch_execute(&sql).await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}: {dropped:?}", self.name);
        }
    }
}
