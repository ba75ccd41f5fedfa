//! A PostgreSQL schema of the test's own, holding its outbox table (and any table of the test), at
//! `DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/test`, which `scripts/test --setup-only`
//! starts). Dropped by [`TestDb::drop_schema`]; a failed test leaves its schema, named after the
//! process and a counter, for a look.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::{AssertSqlSafe, PgPool};

const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// A schema, its outbox table `<schema>.outbox` (migrated), and a pool.
#[derive(Debug)]
pub struct TestDb {
    pub pool: PgPool,
    pub schema: String,
    pub table: String,
    pub url: String,
}

pub fn database_url() -> String {
    std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned())
}

impl TestDb {
    /// A fresh schema with a migrated outbox table; panics with what to do when PostgreSQL is away.
    pub async fn new() -> Self {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let url = database_url();
        let pool = PgPoolOptions::new()
            .max_connections(20)
            .acquire_timeout(Duration::from_secs(10))
            .connect(&url)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "cannot connect to PostgreSQL at {url}: {e}\nThe outbox tests need one: run \
                     `scripts/test --setup-only` (installs and starts it) or set DATABASE_URL."
                )
            });
        let schema = format!(
            "outbox_test_{}_{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        )))
        .execute(&pool)
        .await
        .expect("creating the test's schema");
        let table = format!("{schema}.outbox");
        let mut conn = pool.acquire().await.unwrap();
        postpone_postgres::migrate(&mut conn, &table)
            .await
            .expect("migrating the outbox table");
        TestDb {
            pool,
            schema,
            table,
            url,
        }
    }

    /// Runs `UPDATE <outbox table> SET <set>` on every row (a test moving its rows' times).
    pub async fn update_rows(&self, set: &str) {
        sqlx::query(AssertSqlSafe(format!("UPDATE {} SET {set}", self.table)))
            .execute(&self.pool)
            .await
            .unwrap();
    }

    /// Rows in the outbox table.
    pub async fn rows(&self) -> i64 {
        sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT count(*) FROM {}",
            self.table
        )))
        .fetch_one(&self.pool)
        .await
        .unwrap()
    }

    /// Waits until no session holds a lock on an outbox row: a killed relay's session keeps its
    /// `FOR UPDATE` locks until PostgreSQL notices the closed socket, which is not instant. Blocks
    /// on the locks themselves (a plain `FOR UPDATE`), so it returns as soon as they are freed.
    pub async fn wait_for_row_locks_freed(&self) {
        let mut tx = self.pool.begin().await.unwrap();
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SET LOCAL lock_timeout = '30s'; SELECT 1 FROM {} FOR UPDATE",
            self.table
        )))
        .execute(&mut *tx)
        .await
        .expect("the killed relay's row locks were never freed");
        tx.rollback().await.unwrap();
    }

    /// Drops the schema and everything in it.
    pub async fn drop_schema(self) {
        sqlx::raw_sql(AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            self.schema
        )))
        .execute(&self.pool)
        .await
        .expect("dropping the test's schema");
        self.pool.close().await;
    }
}
