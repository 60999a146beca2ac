//! MCP sessions over HTTP, each bound to the key that opened it, capped per key and in all, and
//! ended when idle or never confirmed, so that nothing a client sends makes this process keep
//! unbounded state (docs/reliability.md, "MCP over HTTP").
//!
//! rmcp keeps the sessions ([`LocalSessionManager`], behind [`Manager`], which tells the gate
//! when rmcp closes one). The [`Gate`] stands in front of it: clients never see rmcp's session
//! ids, only ids of the gate's own (256 random bits), each mapped to rmcp's id and to the
//! SHA-256 of the key that opened it. A request naming an id the gate does not hold for the
//! request's key is answered as an unknown session (404) before rmcp sees it, so an id read in a
//! log line of rmcp's, or stolen from another client, opens nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError, SessionConfig,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};

/// How many MCP sessions may live, and for how long without use; the defaults are documented
/// on each field (flags of `serve` and `mcp --http`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Live sessions one key may hold (default 32). One more closes the key's longest idle
    /// session, or is refused with 429 when every one of them is in use.
    pub per_key: usize,
    /// Live sessions in all (default 1,024; about 50 KiB each). When full, a key holding its
    /// fair share (this divided by the keys holding sessions) or more is refused with 429, and
    /// a key below it takes the place of the longest idle session of the key holding most.
    pub total: usize,
    /// A session with no request for this long and no stream open is closed (default 120 s).
    pub idle: Duration,
    /// A session that sends nothing after its `initialize` for this long is closed (default
    /// 10 s; a client sends `notifications/initialized` at once).
    pub unconfirmed: Duration,
    /// A key holding sessions that makes no request is asked about again this often, so that
    /// the sessions of a key revoked or expired meanwhile end even while they only hold a
    /// stream open (default 30 s; a key's request is checked every time anyway).
    pub key_recheck: Duration,
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            per_key: 32,
            total: 1024,
            idle: Duration::from_secs(120),
            unconfirmed: Duration::from_secs(10),
            key_recheck: Duration::from_secs(30),
        }
    }
}

/// Seconds a client refused a session is told to wait (`Retry-After`).
pub const RETRY_AFTER_SECS: u64 = 5;

/// Who opened a session: the SHA-256 of its key (the key itself is never kept here).
pub type Owner = [u8; 32];

/// One live session.
#[derive(Debug)]
struct Entry {
    /// rmcp's id of it.
    internal: SessionId,
    owner: Owner,
    opened: Instant,
    /// The end of its last request.
    last: Instant,
    /// Requests and streams of it in flight.
    busy: usize,
    /// It made a request after its `initialize`.
    confirmed: bool,
}

impl Entry {
    fn idle_for(&self, now: Instant) -> Option<Duration> {
        (self.busy == 0).then(|| now.saturating_duration_since(self.last))
    }
}

#[derive(Debug, Default)]
struct Table {
    /// By the id clients see.
    sessions: HashMap<String, Entry>,
    /// rmcp's id to the id clients see.
    internal: HashMap<SessionId, String>,
    /// Sessions (live and being opened) of each key.
    owners: HashMap<Owner, usize>,
    /// Sessions (live and being opened) in all.
    total: usize,
}

impl Table {
    fn remove(&mut self, external: &str) -> Option<Entry> {
        let entry = self.sessions.remove(external)?;
        self.internal.remove(&entry.internal);
        self.release(&entry.owner);
        Some(entry)
    }

    fn release(&mut self, owner: &Owner) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.owners.get_mut(owner) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.owners.remove(owner);
            }
        }
    }

    /// The longest idle session of `owner`.
    fn longest_idle_of(&self, owner: &Owner, now: Instant) -> Option<String> {
        self.sessions
            .iter()
            .filter(|(_, e)| &e.owner == owner)
            .filter_map(|(id, e)| e.idle_for(now).map(|idle| (idle, id)))
            .max_by_key(|(idle, _)| *idle)
            .map(|(_, id)| id.clone())
    }
}

#[derive(Debug)]
struct Shared {
    limits: SessionLimits,
    table: Mutex<Table>,
}

impl Shared {
    fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// rmcp's session manager, telling the gate when it closes a session (idle, a worker that
/// ended, a `DELETE`), so that the gate's counts are those of the sessions rmcp holds.
#[derive(Debug)]
pub struct Manager {
    inner: LocalSessionManager,
    shared: Arc<Shared>,
}

impl SessionManager for Manager {
    type Error = LocalSessionManagerError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let closed = self.inner.close_session(id).await;
        let mut table = self.shared.table();
        if let Some(external) = table.internal.get(id).cloned() {
            table.remove(&external);
        }
        closed
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        self.inner.restore_session(id).await
    }
}

/// Why a new session was refused (429 with `Retry-After`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The key holds its cap of sessions, each in use.
    KeyFull,
    /// Every session of the process is taken and the key holds its fair share or more, or
    /// none of the key holding most is idle.
    Full,
}

impl Refused {
    /// The message the client reads.
    pub fn message(self, limits: &SessionLimits) -> String {
        match self {
            Refused::KeyFull => format!(
                "this key holds {} MCP sessions, each in use: end one (DELETE /mcp) or retry later",
                limits.per_key
            ),
            Refused::Full => "this server holds as many MCP sessions as it may: retry later".into(),
        }
    }
}

/// The gate in front of rmcp's sessions (module docs).
#[derive(Debug, Clone)]
pub struct Gate {
    shared: Arc<Shared>,
    manager: Arc<Manager>,
}

/// A request under way on a session: the session counts as in use until this is dropped (with
/// the answer's body, for a stream).
#[derive(Debug)]
pub struct InUse {
    shared: Arc<Shared>,
    external: String,
}

impl Drop for InUse {
    fn drop(&mut self) {
        let mut table = self.shared.table();
        if let Some(e) = table.sessions.get_mut(&self.external) {
            e.busy = e.busy.saturating_sub(1);
            e.last = Instant::now();
        }
    }
}

/// A place held for a session being opened; given back when dropped unless
/// [`Opening::opened`] took it.
#[derive(Debug)]
pub struct Opening {
    shared: Arc<Shared>,
    owner: Owner,
    held: bool,
}

impl Opening {
    /// rmcp opened the session `internal`: the id its client is to use.
    pub fn opened(mut self, internal: SessionId) -> String {
        let external = new_id();
        let now = Instant::now();
        let mut table = self.shared.table();
        table.internal.insert(internal.clone(), external.clone());
        table.sessions.insert(
            external.clone(),
            Entry {
                internal,
                owner: self.owner,
                opened: now,
                last: now,
                busy: 0,
                confirmed: false,
            },
        );
        self.held = false;
        external
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        if self.held {
            self.shared.table().release(&self.owner);
        }
    }
}

/// A new session id clients see: 256 bits from the OS, hex.
fn new_id() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random number generator is available");
    hex::encode(bytes)
}

impl Gate {
    /// A gate within `limits`, and the manager to give rmcp's service.
    pub fn new(limits: SessionLimits) -> Gate {
        let shared = Arc::new(Shared {
            limits,
            table: Mutex::default(),
        });
        // rmcp's own timeouts stay as a backstop behind the gate's.
        let mut config = SessionConfig::default();
        config.keep_alive = Some(limits.idle + Duration::from_secs(60));
        config.init_timeout = Some(limits.unconfirmed);
        // Answers kept for a client that resumes a broken stream (after its 3 s retry).
        config.completed_cache_ttl = Duration::from_secs(10);
        let mut inner = LocalSessionManager::default();
        inner.session_config = config;
        let manager = Arc::new(Manager {
            inner,
            shared: shared.clone(),
        });
        Gate { shared, manager }
    }

    /// The manager to give rmcp's `StreamableHttpService`.
    pub fn manager(&self) -> Arc<Manager> {
        self.manager.clone()
    }

    /// The limits.
    pub fn limits(&self) -> SessionLimits {
        self.shared.limits
    }

    /// A request of `owner` on the session clients know as `external`: rmcp's id of it and the
    /// mark that holds it in use, or `None` when there is no such session of that key (another
    /// key's answers exactly as an unknown one).
    pub fn enter(&self, external: &str, owner: &Owner) -> Option<(SessionId, InUse)> {
        let mut table = self.shared.table();
        let entry = table.sessions.get_mut(external)?;
        if !constant_time_eq(&entry.owner, owner) {
            return None;
        }
        entry.busy += 1;
        entry.confirmed = true;
        entry.last = Instant::now();
        let internal = entry.internal.clone();
        drop(table);
        Some((
            internal,
            InUse {
                shared: self.shared.clone(),
                external: external.to_string(),
            },
        ))
    }

    /// A place for a new session of `owner`, with the sessions to close first to make room
    /// (already out of the gate's table), or why there is none.
    pub fn open(&self, owner: &Owner) -> Result<(Opening, Vec<SessionId>), Refused> {
        let limits = self.shared.limits;
        let now = Instant::now();
        let mut table = self.shared.table();
        let mut evicted = Vec::new();
        let mine = table.owners.get(owner).copied().unwrap_or(0);
        if mine >= limits.per_key {
            // Only the key's own sessions make room for it.
            let victim = table.longest_idle_of(owner, now).ok_or(Refused::KeyFull)?;
            evicted.extend(table.remove(&victim).map(|e| e.internal));
        } else if table.total >= limits.total {
            // The places over the keys holding sessions; a key holding none is always below
            // its share (at least 1), whatever it is.
            let fair = (limits.total / table.owners.len().max(1)).max(1);
            if mine >= fair {
                return Err(Refused::Full);
            }
            // A key below its share takes the place of the key holding most (which then holds
            // more than its share).
            let (heaviest, _) = table
                .owners
                .iter()
                .max_by_key(|(_, n)| **n)
                .map(|(o, n)| (*o, *n))
                .ok_or(Refused::Full)?;
            let victim = table.longest_idle_of(&heaviest, now).ok_or(Refused::Full)?;
            evicted.extend(table.remove(&victim).map(|e| e.internal));
        }
        *table.owners.entry(*owner).or_insert(0) += 1;
        table.total += 1;
        drop(table);
        Ok((
            Opening {
                shared: self.shared.clone(),
                owner: *owner,
                held: true,
            },
            evicted,
        ))
    }

    /// Takes the session `external` of `owner` out of the gate (its client ended it); rmcp's
    /// id of it, to close.
    pub fn end(&self, external: &str, owner: &Owner) -> Option<SessionId> {
        let mut table = self.shared.table();
        let entry = table.sessions.get(external)?;
        if !constant_time_eq(&entry.owner, owner) {
            return None;
        }
        table.remove(external).map(|e| e.internal)
    }

    /// Takes every session of `owner` out of the gate (its key is refused now); rmcp's ids of
    /// them, to close.
    pub fn end_all_of(&self, owner: &Owner) -> Vec<SessionId> {
        let mut table = self.shared.table();
        let ids: Vec<String> = table
            .sessions
            .iter()
            .filter(|(_, e)| &e.owner == owner)
            .map(|(id, _)| id.clone())
            .collect();
        ids.iter()
            .filter_map(|id| table.remove(id).map(|e| e.internal))
            .collect()
    }

    /// Takes out of the gate the sessions idle past [`SessionLimits::idle`] and those never
    /// confirmed within [`SessionLimits::unconfirmed`]; rmcp's ids of them, to close.
    pub fn expired(&self) -> Vec<SessionId> {
        let limits = self.shared.limits;
        let now = Instant::now();
        let mut table = self.shared.table();
        let ids: Vec<String> = table
            .sessions
            .iter()
            .filter(|(_, e)| {
                let idle = e.idle_for(now).is_some_and(|d| d >= limits.idle);
                let unconfirmed = !e.confirmed
                    && e.busy == 0
                    && now.saturating_duration_since(e.opened) >= limits.unconfirmed;
                idle || unconfirmed
            })
            .map(|(id, _)| id.clone())
            .collect();
        ids.iter()
            .filter_map(|id| table.remove(id).map(|e| e.internal))
            .collect()
    }

    /// The keys holding sessions now.
    pub fn owners(&self) -> Vec<Owner> {
        self.shared.table().owners.keys().copied().collect()
    }

    /// Sessions live (and being opened): in all, and of `owner`.
    #[cfg(test)]
    pub fn count(&self, owner: Option<&Owner>) -> usize {
        let table = self.shared.table();
        match owner {
            None => table.total,
            Some(o) => table.owners.get(o).copied().unwrap_or(0),
        }
    }

    /// Closes rmcp's sessions `ids` (already out of the gate), freeing what they hold.
    pub async fn close(&self, ids: Vec<SessionId>) {
        for id in ids {
            if let Err(e) = self.manager.inner.close_session(&id).await {
                tracing::debug!(error = %e, "an MCP session was already gone when closed");
            }
        }
    }

    /// How often [`Gate::expired`] should be asked (and keys rechecked): a quarter of the
    /// shortest of the timeouts and [`SessionLimits::key_recheck`], between 100 ms and 5 s.
    pub fn sweep_interval(&self) -> Duration {
        let limits = self.shared.limits;
        (limits.idle.min(limits.unconfirmed).min(limits.key_recheck) / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(5))
    }
}

/// Equality of two owners in time that does not depend on where they differ.
fn constant_time_eq(a: &Owner, b: &Owner) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_key: usize, total: usize) -> SessionLimits {
        SessionLimits {
            per_key,
            total,
            ..SessionLimits::default()
        }
    }

    fn internal(n: usize) -> SessionId {
        format!("rmcp-{n}").into()
    }

    /// Opens a session of `owner`; its client-facing id.
    fn open(gate: &Gate, owner: u8, n: usize) -> Result<(String, Vec<SessionId>), Refused> {
        let (opening, evicted) = gate.open(&[owner; 32])?;
        Ok((opening.opened(internal(n)), evicted))
    }

    #[test]
    fn a_session_answers_only_its_own_key() {
        let gate = Gate::new(limits(4, 16));
        let (id, _) = open(&gate, 1, 0).unwrap();
        assert!(gate.enter(&id, &[2; 32]).is_none());
        assert!(gate.end(&id, &[2; 32]).is_none());
        assert!(gate.enter("nope", &[1; 32]).is_none());
        let (rmcp_id, _in_use) = gate.enter(&id, &[1; 32]).unwrap();
        assert_eq!(rmcp_id, internal(0));
        assert_eq!(id.len(), 64);
        assert_ne!(id, rmcp_id.to_string());
    }

    #[test]
    fn past_its_cap_a_key_closes_its_own_longest_idle_session() {
        let gate = Gate::new(limits(2, 16));
        let (other, _) = open(&gate, 9, 99).unwrap();
        let (first, _) = open(&gate, 1, 0).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        let (second, _) = open(&gate, 1, 1).unwrap();
        let (_third, evicted) = open(&gate, 1, 2).unwrap();
        assert_eq!(evicted, vec![internal(0)]);
        assert!(gate.enter(&first, &[1; 32]).is_none());
        // Both in use now: the next is refused, and never takes another key's place.
        let _a = gate.enter(&second, &[1; 32]).unwrap();
        let _b = gate.enter(&_third, &[1; 32]).unwrap();
        assert_eq!(open(&gate, 1, 3).unwrap_err(), Refused::KeyFull);
        assert!(gate.enter(&other, &[9; 32]).is_some());
        assert_eq!(gate.count(Some(&[1; 32])), 2);
    }

    #[test]
    fn when_full_a_key_below_its_share_gets_in() {
        let gate = Gate::new(limits(100, 4));
        for n in 0..4 {
            open(&gate, 1, n).unwrap();
        }
        // Key 1 holds all four: it is past its share, refused.
        assert_eq!(open(&gate, 1, 4).unwrap_err(), Refused::Full);
        // Key 2 holds none: it takes key 1's longest idle place.
        let (_, evicted) = open(&gate, 2, 5).unwrap();
        assert_eq!(evicted.len(), 1);
        assert_eq!(gate.count(None), 4);
        assert_eq!(gate.count(Some(&[2; 32])), 1);
    }

    /// The share is the places divided by the keys holding sessions: of 6 places, A holding 4
    /// and B 2, B is below its share of 3 and gets in, in place of A's longest idle; A, past
    /// it, is refused; C, holding none, gets in.
    #[test]
    fn the_share_is_the_places_over_the_keys() {
        let gate = Gate::new(limits(100, 6));
        for n in 0..4 {
            open(&gate, 1, n).unwrap();
        }
        for n in 4..6 {
            open(&gate, 2, n).unwrap();
        }
        let (_, evicted) = open(&gate, 2, 6).unwrap();
        assert_eq!(evicted, vec![internal(0)]);
        assert_eq!(
            (gate.count(Some(&[1; 32])), gate.count(Some(&[2; 32]))),
            (3, 3)
        );
        assert_eq!(open(&gate, 1, 7).unwrap_err(), Refused::Full);
        let (_, evicted) = open(&gate, 3, 8).unwrap();
        assert_eq!(evicted.len(), 1);
        assert_eq!(gate.count(None), 6);
    }

    /// A session its client ends leaves the gate: its place is free again at once.
    #[test]
    fn a_session_ended_by_its_client_frees_its_place() {
        let gate = Gate::new(limits(1, 1));
        let (id, _) = open(&gate, 1, 0).unwrap();
        assert_eq!(gate.end(&id, &[1; 32]), Some(internal(0)));
        assert_eq!(gate.count(None), 0);
        assert!(gate.enter(&id, &[1; 32]).is_none());
        let (_, evicted) = open(&gate, 2, 1).unwrap();
        assert!(evicted.is_empty());
    }

    #[test]
    fn an_opening_not_completed_gives_its_place_back() {
        let gate = Gate::new(limits(1, 1));
        let (opening, _) = gate.open(&[1; 32]).unwrap();
        assert_eq!(gate.count(None), 1);
        drop(opening);
        assert_eq!(gate.count(None), 0);
        assert!(gate.open(&[1; 32]).is_ok());
    }

    #[test]
    fn idle_and_unconfirmed_sessions_expire_but_not_those_in_use() {
        let gate = Gate::new(SessionLimits {
            idle: Duration::from_millis(40),
            unconfirmed: Duration::from_millis(20),
            ..limits(8, 8)
        });
        let (unconfirmed, _) = open(&gate, 1, 0).unwrap();
        let (streaming, _) = open(&gate, 1, 1).unwrap();
        let (idle, _) = open(&gate, 1, 2).unwrap();
        let held = gate.enter(&streaming, &[1; 32]).unwrap();
        drop(gate.enter(&idle, &[1; 32]).unwrap());
        std::thread::sleep(Duration::from_millis(25));
        assert_eq!(gate.expired(), vec![internal(0)]);
        assert!(gate.enter(&unconfirmed, &[1; 32]).is_none());
        std::thread::sleep(Duration::from_millis(25));
        assert_eq!(gate.expired(), vec![internal(2)]);
        assert!(gate.expired().is_empty(), "a session in use never expires");
        drop(held);
        assert_eq!(gate.count(None), 1);
    }

    #[test]
    fn a_refused_key_loses_every_session() {
        let gate = Gate::new(limits(8, 8));
        for n in 0..3 {
            open(&gate, 1, n).unwrap();
        }
        open(&gate, 2, 3).unwrap();
        assert_eq!(gate.end_all_of(&[1; 32]).len(), 3);
        assert_eq!(gate.count(None), 1);
        assert_eq!(gate.owners(), vec![[2; 32]]);
    }
}
