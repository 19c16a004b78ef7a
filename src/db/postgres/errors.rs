//! Connecting to PostgreSQL, and its errors in words: the server's message with its detail and
//! hint, the socket file looked for, a peer that does not speak the protocol; never a password.

use std::time::Duration;

use anyhow::{anyhow, Result};
use postgres::{Client, NoTls};

use crate::db::redact_dsn;

/// A PostgreSQL error in words (server message, detail and hint when there are any).
pub(crate) fn pg_msg(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = db.message().to_string();
        if let Some(d) = db.detail() {
            s.push_str(&format!(" ({d})"));
        }
        if let Some(h) = db.hint() {
            s.push_str(&format!(" (hint: {h})"));
        }
        return s;
    }
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(x) = src {
        s.push_str(&format!(": {x}"));
        src = x.source();
    }
    s
}

pub(super) trait PgCtx<T> {
    fn pg(self, what: &str) -> Result<T>;
}

impl<T> PgCtx<T> for std::result::Result<T, postgres::Error> {
    fn pg(self, what: &str) -> Result<T> {
        self.map_err(|e| anyhow!("{what}: {}", pg_msg(&e)))
    }
}

pub(super) fn is_code(e: &postgres::Error, code: &postgres::error::SqlState) -> bool {
    e.code() == Some(code)
}

/// Connect, with a clear message that never shows the password.
pub fn connect(dsn: &str) -> Result<Client> {
    connect_database(dsn, None)
}

/// The catalogs of the server at `dsn`, for `watch`'s relation names and query ids: connects
/// to the DSN's database, or to another database of the same server (same host, user,
/// password), as `iolens-watch`.
pub fn catalog(dsn: &str) -> crate::watch::relations::Catalog {
    let owned = dsn.to_string();
    crate::watch::relations::Catalog {
        connect: std::sync::Arc::new(move |db| connect_database(&owned, db)),
        shown: format!("'{}'", redact_dsn(dsn)),
    }
}

/// Connect to database `db` (the DSN's own when `None`).
fn connect_database(dsn: &str, db: Option<&str>) -> Result<Client> {
    // libpq's conventions: PG* environment variables, the password file, libpq's defaults.
    let r = crate::db::libpq::resolve(dsn)
        .map_err(|e| anyhow!("the DSN '{}' cannot be used: {e}", redact_dsn(dsn)))?;
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        for w in &r.warnings {
            crate::out::note(w);
        }
    });
    let mut cfg = r.config;
    cfg.application_name("iolens-db");
    if let Some(db) = db {
        cfg.dbname(db);
    }
    if cfg.get_connect_timeout().is_none() {
        cfg.connect_timeout(Duration::from_secs(10));
    }
    cfg.connect(NoTls).map_err(|e| {
        let pw = match &r.password {
            crate::db::libpq::PasswordSource::None => "no password".to_string(),
            crate::db::libpq::PasswordSource::Dsn => "password from the DSN".to_string(),
            crate::db::libpq::PasswordSource::Env => "password from PGPASSWORD".to_string(),
            crate::db::libpq::PasswordSource::File(f) => format!("password from {}", f.display()),
        };
        anyhow!(
            "cannot connect to PostgreSQL with '{}' (host {}, user {}, {pw}): {}",
            redact_dsn(dsn),
            crate::db::libpq::describe_hosts(&cfg),
            cfg.get_user().unwrap_or("?"),
            connect_failure(&cfg, &e)
        )
    })
}

/// Why a connection failed, in words that name what was tried: the socket file looked for, a
/// peer that does not speak PostgreSQL's protocol.
pub(super) fn connect_failure(cfg: &postgres::Config, e: &postgres::Error) -> String {
    let msg = pg_msg(e);
    let ports = cfg.get_ports();
    let port = ports.first().copied().unwrap_or(5432);
    let sockets: Vec<String> = cfg
        .get_hosts()
        .iter()
        .filter_map(|h| match h {
            postgres::config::Host::Unix(p) => {
                Some(p.join(format!(".s.PGSQL.{port}")).display().to_string())
            }
            _ => None,
        })
        .collect();
    let not_found = std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |x| {
        x.source()
    })
    .any(|x| {
        x.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
    });
    if not_found && !sockets.is_empty() {
        return format!(
            "no server socket {} (is the server running, with that directory in its \
             unix_socket_directories and port {port}?)",
            sockets.join(" or ")
        );
    }
    if msg.contains("bytes remaining on stream") || msg.contains("unexpected message") {
        return format!(
            "the peer at port {port} did not answer as a PostgreSQL server does (another \
             service on that port?): {msg}"
        );
    }
    msg
}
