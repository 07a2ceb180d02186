//! The store's clock: the database's time, so processes on hosts whose clocks disagree still
//! agree on when a lease expires or a heartbeat went stale.
//!
//! Theory of operation: on PostgreSQL the store reads the server's `clock_timestamp()` when it
//! connects and every [`SYNC_INTERVAL`] after, and notes the local monotonic instant halfway
//! through the round trip. `now()` is that reading plus the monotonic time elapsed since, so it
//! is the database's time to within half a round trip (and the monotonic clock's drift over a
//! minute, parts per million), costs no round trip, and does not move when the host's
//! wall clock is wrong or is stepped. Every time the store writes (heartbeats, lease expiries,
//! history) comes from it, and so does every comparison with one (`Store::now`), which is
//! what keeps a conductor whose host clock is minutes off from taking a live lease or keeping
//! a dead one. On SQLite (one host) and before the first reading it is the host's clock.
//! A new reading a little behind the last time handed out (the error of a round trip) waits
//! for the clock to catch up rather than going back; the first reading after the host's clock
//! was used (the database did not answer) replaces it whatever the difference.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, TimeDelta, Utc};
use sqlx::postgres::PgPool;

/// How often the store reads the database's clock again.
const SYNC_INTERVAL: Duration = Duration::from_secs(60);

/// A reading slower than this (a loaded database) is not trusted: its error is half of it.
const MAX_ROUND_TRIP: Duration = Duration::from_secs(1);

#[derive(Debug, Default)]
pub(crate) struct Clock {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The database's time at a local instant.
    reading: Option<(DateTime<Utc>, Instant)>,
    /// The latest time handed out.
    last: Option<DateTime<Utc>>,
}

impl Clock {
    pub(crate) fn now(&self) -> DateTime<Utc> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = match state.reading {
            Some((time, at)) => TimeDelta::from_std(at.elapsed())
                .ok()
                .and_then(|elapsed| time.checked_add_signed(elapsed))
                .unwrap_or(time),
            None => Utc::now(),
        };
        let now = match state.last {
            Some(last)
                if now < last && (last - now).to_std().unwrap_or_default() < MAX_ROUND_TRIP =>
            {
                last
            }
            _ => now,
        };
        state.last = Some(now);
        now
    }

    fn set(&self, time: DateTime<Utc>, at: Instant) {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .reading = Some((time, at));
    }
}

/// Reads the database's clock once; `false` when it did not answer in time.
async fn sync_once(clock: &Clock, pool: &PgPool) -> bool {
    let sent = Instant::now();
    let read: Result<DateTime<Utc>, _> = sqlx::query_scalar("SELECT clock_timestamp()")
        .fetch_one(pool)
        .await;
    let round_trip = sent.elapsed();
    match read {
        Ok(time) if round_trip <= MAX_ROUND_TRIP => {
            clock.set(time, sent + round_trip / 2);
            true
        }
        Ok(_) => false,
        Err(error) => {
            tracing::debug!(%error, "could not read the database's clock");
            false
        }
    }
}

/// Reads the database's clock now, then every [`SYNC_INTERVAL`] while the store lives.
pub(crate) async fn spawn_sync(clock: Arc<Clock>, pool: PgPool) {
    sync_once(&clock, &pool).await;
    let clock: Weak<Clock> = Arc::downgrade(&clock);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(SYNC_INTERVAL).await;
            let Some(clock) = clock.upgrade() else {
                return;
            };
            if pool.is_closed() {
                return;
            }
            sync_once(&clock, &pool).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_follows_its_reading_and_never_goes_back() {
        let clock = Clock::default();
        let host = clock.now();
        assert!((Utc::now() - host).num_seconds().abs() < 5);
        // A database ten minutes behind this host: the clock follows it, not the host.
        let database = Utc::now() - TimeDelta::minutes(10);
        clock.set(database, Instant::now());
        let read = clock.now();
        assert!(
            (read - database).num_seconds().abs() < 5,
            "{read} vs {database}"
        );
        // A reading a few milliseconds behind the last time handed out does not go back.
        clock.set(read - TimeDelta::milliseconds(5), Instant::now());
        assert!(clock.now() >= read);
    }
}
