//! Which Redis to talk to, as the library reads it: `--cluster` / `REDIS_CLUSTER_NODES`, `--redis` /
//! `REDIS_URL`, `--namespace` / `POSTPONE_NAMESPACE`.

use clap::parser::ValueSource;
use clap::ArgMatches;
use postpone::Client;

use crate::args::Cli;

/// Where the CLI connects when told nothing.
pub(crate) const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The Redis to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// One Redis.
    Redis(String),
    /// A cluster, from seed URLs.
    Cluster(Vec<String>),
}

impl Target {
    /// A flag given on the command line wins over the environment; a cluster wins over one Redis
    /// when both come from the same place (as in `Client::from_env`).
    pub(crate) fn choose(cli: &Cli, matches: &ArgMatches) -> Target {
        let on_command_line = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        let cluster: Vec<String> = cli
            .cluster
            .iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let redis = cli.redis.clone().filter(|u| !u.is_empty());
        match (cluster.is_empty(), redis) {
            (false, Some(url)) if on_command_line("redis") && !on_command_line("cluster") => {
                Target::Redis(url)
            }
            (false, _) => Target::Cluster(cluster),
            (true, Some(url)) => Target::Redis(url),
            (true, None) => Target::Redis(DEFAULT_URL.to_owned()),
        }
    }

    /// Connects, in `namespace`.
    pub(crate) async fn connect(&self, namespace: &str) -> postpone::Result<Client> {
        let builder = Client::builder().namespace(namespace);
        match self {
            Target::Redis(url) => builder.redis(url).await,
            Target::Cluster(nodes) => builder.redis_cluster(nodes).await,
        }
    }

    /// The target as shown to a person: URLs without their user-info (no password).
    pub(crate) fn shown(&self) -> String {
        match self {
            Target::Redis(url) => without_userinfo(url),
            Target::Cluster(nodes) => format!(
                "cluster {}",
                nodes
                    .iter()
                    .map(|n| without_userinfo(n))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

/// `redis://user:secret@host:6379/0` as `redis://***@host:6379/0`.
pub(crate) fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_owned(),
    };
    match scheme {
        Some(s) => format!("{s}://{authority}{path}"),
        None => format!("{authority}{path}"),
    }
}

#[cfg(test)]
mod tests {
    use super::without_userinfo;

    #[test]
    fn shown_urls_have_no_password() {
        assert_eq!(
            without_userinfo("redis://admin:hunter2@example.com:6379/0"),
            "redis://***@example.com:6379/0"
        );
        assert_eq!(
            without_userinfo("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
        assert_eq!(without_userinfo("rediss://:p@ss@h:1"), "rediss://***@h:1");
    }
}
