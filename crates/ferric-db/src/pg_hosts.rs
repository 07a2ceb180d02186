//! A `database_url` naming several PostgreSQL servers — libpq's multi-host form,
//! `postgres://user@db-a:5432,db-b:5432/ferric?target_session_attrs=read-write` — and
//! following the primary among them when it fails over.
//!
//! Theory of operation: sqlx 0.8 connects to one host per URL and knows no
//! `target_session_attrs`, so the list is split here into one set of connect options per host
//! (user, password, database and the other parameters shared). At start the store connects to
//! the first host that answers and, unless `target_session_attrs=any`, is not in recovery
//! (`pg_is_in_recovery()`), in the order given, as libpq does. Then a follower task asks the
//! pool every [`FOLLOW_INTERVAL`] whether its server is still a writable primary; when it is
//! not (it died, or came back as a standby) the hosts are tried again in order and the pool is
//! pointed at the new primary (`Pool::set_connect_options`): connections opened from then on
//! go there. Connections to the old primary broke with it; a fresh connection that lands on a
//! standby anyway (a race with a promotion) is refused by the pool's `after_connect` check, so
//! no write ever goes to a read-only server. Requests in flight when the primary dies fail
//! with the database error the caller already handles (503, a retried conductor step).
//!
//! Architecture invariant: a URL with one host behaves exactly as before — no follower, no
//! check per connection.
//!
//! Ferric always writes, so a multi-host URL without `target_session_attrs` means
//! `read-write` here (libpq's default, `any`, would send writes to whichever host answers
//! first); `read-only`, `standby` and `prefer-standby` are refused with a message.

use std::str::FromStr;
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool};

/// How often the follower checks that the pool's server is still a writable primary.
pub(crate) const FOLLOW_INTERVAL: Duration = Duration::from_secs(1);

/// How long one host may take to answer before the next is tried.
const HOST_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the pool's server may take to say it is still the primary. Short: when it died,
/// the pool keeps retrying its address until this runs out, and that is the failover's delay.
/// A server merely slow to answer costs one look at the hosts, which finds it again.
const CHECK_TIMEOUT: Duration = Duration::from_millis(500);

/// The servers of a `database_url`, in the order given.
#[derive(Clone, Debug)]
pub(crate) struct Hosts {
    targets: Vec<PgConnectOptions>,
    /// `target_session_attrs` asks for a writable primary (`read-write`, `primary`, or unset
    /// with several hosts).
    primary_only: bool,
}

fn invalid(message: String) -> sqlx::Error {
    sqlx::Error::Configuration(message.into())
}

impl Hosts {
    /// Splits `url` into one URL per host; the same URL back for a single host.
    pub(crate) fn parse(url: &str) -> Result<Self, sqlx::Error> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| invalid("a PostgreSQL URL starts with postgres://".to_owned()))?;
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let (userinfo, host_list) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let (path, query) = match tail.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (tail, None),
        };
        let mut attrs = None;
        let params: Vec<&str> = query
            .into_iter()
            .flat_map(|query| query.split('&'))
            .filter(|param| match param.split_once('=') {
                Some(("target_session_attrs", value)) => {
                    attrs = Some(value.to_owned());
                    false
                }
                _ => !param.is_empty(),
            })
            .collect();
        let hosts: Vec<&str> = host_list.split(',').collect();
        let primary_only = match attrs.as_deref() {
            None => hosts.len() > 1,
            Some("any") => false,
            Some("read-write" | "primary") => true,
            Some(other) => {
                return Err(invalid(format!(
                    "target_session_attrs={other} is not usable: Ferric writes to its database, \
                     so use read-write (or primary, or any)"
                )));
            }
        };
        let suffix = if params.is_empty() {
            path.to_owned()
        } else {
            format!("{path}?{}", params.join("&"))
        };
        let targets = hosts
            .iter()
            .map(|host| {
                if host.is_empty() {
                    return Err(invalid(format!(
                        "the database URL names an empty host in {host_list:?}"
                    )));
                }
                let one = match userinfo {
                    Some(userinfo) => format!("{scheme}://{userinfo}@{host}{suffix}"),
                    None => format!("{scheme}://{host}{suffix}"),
                };
                PgConnectOptions::from_str(&one)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            targets,
            primary_only,
        })
    }

    /// More than one server: the pool follows the primary among them.
    pub(crate) fn several(&self) -> bool {
        self.targets.len() > 1
    }

    /// Whether every connection must be to a writable primary.
    pub(crate) fn primary_only(&self) -> bool {
        self.primary_only
    }

    /// The first server, in the order given, that answers and suits `target_session_attrs`;
    /// the last error when none does.
    pub(crate) async fn pick(&self) -> Result<PgConnectOptions, sqlx::Error> {
        if !self.several() && !self.primary_only {
            return Ok(self.targets[0].clone());
        }
        let mut last = None;
        for target in &self.targets {
            match tokio::time::timeout(HOST_TIMEOUT, suits(target, self.primary_only)).await {
                Ok(Ok(())) => return Ok(target.clone()),
                Ok(Err(error)) => last = Some(error),
                Err(_) => last = Some(sqlx::Error::PoolTimedOut),
            }
        }
        Err(last.unwrap_or_else(|| invalid("the database URL names no host".to_owned())))
    }

    /// Starts the task that points `pool` at the primary after a failover (several hosts
    /// only); it ends when the pool is closed.
    pub(crate) fn follow(self, pool: PgPool) {
        if !self.several() {
            return;
        }
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(FOLLOW_INTERVAL);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            while !pool.is_closed() {
                ticker.tick().await;
                let healthy = tokio::time::timeout(CHECK_TIMEOUT, async {
                    let standby: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
                        .fetch_one(&pool)
                        .await?;
                    Ok::<_, sqlx::Error>(!standby || !self.primary_only)
                })
                .await;
                if matches!(healthy, Ok(Ok(true))) {
                    continue;
                }
                let current = pool.connect_options();
                match self.pick().await {
                    Ok(next) if !same_server(&next, &current) => {
                        tracing::warn!(
                            from = %server(&current),
                            to = %server(&next),
                            "the database's primary moved: new connections go to the new one"
                        );
                        pool.set_connect_options(next);
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(%error, "no database server answers as a primary yet");
                    }
                }
            }
        });
    }
}

/// `Ok` when `target` answers and, if `primary_only`, is not a standby.
async fn suits(target: &PgConnectOptions, primary_only: bool) -> Result<(), sqlx::Error> {
    let mut connection = PgConnection::connect_with(target).await?;
    let result = refuse_standby(&mut connection, primary_only).await;
    let _ = connection.close().await;
    result
}

/// The pool's `after_connect` check: a standby is refused when a primary is asked for.
pub(crate) async fn refuse_standby(
    connection: &mut PgConnection,
    primary_only: bool,
) -> Result<(), sqlx::Error> {
    if !primary_only {
        return Ok(());
    }
    let standby: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&mut *connection)
        .await?;
    if standby {
        return Err(invalid(
            "this database server is a standby (in recovery); Ferric needs the primary".to_owned(),
        ));
    }
    Ok(())
}

fn same_server(a: &PgConnectOptions, b: &PgConnectOptions) -> bool {
    a.get_host() == b.get_host() && a.get_port() == b.get_port()
}

fn server(options: &PgConnectOptions) -> String {
    format!("{}:{}", options.get_host(), options.get_port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_list_becomes_one_target_per_host_sharing_the_rest() {
        let hosts = Hosts::parse(
            "postgres://ferric:secret@db-a:5433,db-b,10.0.0.3:6000/ferric?sslmode=disable&target_session_attrs=read-write",
        )
        .unwrap();
        let servers: Vec<String> = hosts.targets.iter().map(server).collect();
        assert_eq!(servers, ["db-a:5433", "db-b:5432", "10.0.0.3:6000"]);
        for target in &hosts.targets {
            assert_eq!(target.get_username(), "ferric");
            assert_eq!(target.get_database(), Some("ferric"));
        }
        assert!(hosts.several() && hosts.primary_only());
    }

    #[test]
    fn one_host_is_unchanged_and_several_default_to_read_write() {
        let one = Hosts::parse("postgres://postgres@127.0.0.1:5432/test").unwrap();
        assert!(!one.several() && !one.primary_only());
        let several = Hosts::parse("postgresql://a,b/test").unwrap();
        assert!(several.primary_only());
        let any = Hosts::parse("postgresql://a,b/test?target_session_attrs=any").unwrap();
        assert!(!any.primary_only());
        let primary = Hosts::parse("postgres://a/test?target_session_attrs=primary").unwrap();
        assert!(primary.primary_only() && !primary.several());
    }

    #[test]
    fn unusable_session_attrs_and_empty_hosts_are_refused_with_a_reason() {
        let error = Hosts::parse("postgres://a,b/test?target_session_attrs=read-only")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("read-only") && error.contains("read-write"),
            "{error}"
        );
        let error = Hosts::parse("postgres://a,,b/test")
            .unwrap_err()
            .to_string();
        assert!(error.contains("empty host"), "{error}");
    }
}
