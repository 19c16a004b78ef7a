//! libpq's connection conventions for the `postgres` crate, which does not follow them itself:
//! environment variables (`PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD`, …), the password file
//! (`PGPASSFILE`, `~/.pgpass`) and libpq's defaults, so a password need never appear on the
//! command line (where `ps` shows it).
//!
//! The rules are libpq's (PostgreSQL documentation, "Environment Variables" and "The Password
//! File"; `conninfo_add_defaults` and `passwordFromFile` in `fe-connect.c`):
//! - a parameter given in the DSN wins; otherwise its environment variable, when set and not
//!   empty; otherwise the built-in default (host: the Unix socket directory, `/var/run/postgresql`
//!   where it exists, else `/tmp`; user: the effective OS user; database: the user name);
//! - when no password is given (or it is empty), the password file is read: the DSN's
//!   `passfile`, else `PGPASSFILE`, else `~/.pgpass` (`$HOME`, else the password database). It is
//!   ignored, with a warning, unless it is a plain file without group or world access (0600 or
//!   less). Lines are `hostname:port:database:username:password`; `#` starts a comment line; each
//!   of the first four fields is `*` (anything) or a literal in which `\` escapes the next
//!   character (`\:`, `\\`); the first matching line wins. `localhost` matches a connection
//!   through the default socket directory; a missing port is 5432. With several hosts, the
//!   first host's line is used for all of them (the crate holds one password per connection).
//!
//! iolens names its sessions `iolens-db` (application_name) whatever `PGAPPNAME` says.
//!
//! Not supported, and refused rather than silently ignored: connection services (`service`,
//! `PGSERVICE`) and TLS (iolens connects without it: `sslmode` `require`, `verify-ca` and
//! `verify-full` are errors; `disable`, `allow` and `prefer` connect in clear).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use postgres::config::{Host, SslMode, TargetSessionAttrs};
use postgres::Config;

/// libpq's default port.
pub const DEFAULT_PORT: u16 = 5432;

/// Where a resolved connection's password came from (never the password itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordSource {
    /// None found: the server may not need one.
    None,
    /// Given in the DSN.
    Dsn,
    /// `PGPASSWORD`.
    Env,
    /// A line of this password file.
    File(PathBuf),
}

/// A DSN resolved by libpq's rules.
#[derive(Debug)]
pub struct Resolved {
    pub config: Config,
    pub password: PasswordSource,
    /// Warnings to show (e.g. a password file with loose permissions, which was ignored).
    pub warnings: Vec<String>,
}

/// The parameters a DSN sets, with their values: libpq's `key = value` form (values may be
/// single-quoted with backslash escapes) or a `postgres://` / `postgresql://` URL.
pub fn dsn_params(dsn: &str) -> Result<BTreeMap<String, String>> {
    Ok(settings(dsn)?
        .into_iter()
        .map(|s| (s.key, s.value))
        .collect())
}

/// One setting of a DSN as the parser reads it: its key and value (unquoted, unescaped,
/// percent-decoded), and the bytes of the DSN that write its value (`hide`) with what shows
/// in their place when the value is a secret (`shown`).
#[derive(Debug)]
pub(crate) struct Setting {
    pub key: String,
    pub value: String,
    hide: std::ops::Range<usize>,
    shown: String,
}

/// The settings of a DSN in the order written (a later one wins), by the one parser that also
/// connects: what it takes as a password is exactly what [`redact`] hides.
pub(crate) fn settings(dsn: &str) -> Result<Vec<Setting>> {
    let lead = dsn.len() - dsn.trim_start().len();
    let t = dsn.trim();
    let mut v = if t.starts_with("postgres://") || t.starts_with("postgresql://") {
        url_settings(t)?
    } else {
        keyword_settings(t)?
    };
    for s in &mut v {
        s.hide = s.hide.start + lead..s.hide.end + lead;
    }
    Ok(v)
}

/// `dsn` with every password the parser finds in it replaced by `***`, whatever its form
/// (quoted, backslash-escaped, percent-encoded key or value, URL user information or query). A
/// DSN that does not parse is not shown at all: nothing says where its password ends.
pub(crate) fn redact(dsn: &str) -> String {
    let Ok(mut v) = settings(dsn) else {
        return "(a DSN that does not parse; not shown, as it may hold a password)".into();
    };
    // The password, and whatever a typo may have made of its key (`pasword=`, `passwd=`,
    // `pwd=`): the crate refuses those, and the error shows the DSN.
    v.retain(|s| {
        let k = s.key.to_ascii_lowercase();
        k != "passfile" && (k.contains("pas") || k.contains("pw"))
    });
    v.sort_by_key(|s| std::cmp::Reverse(s.hide.start));
    let mut out = dsn.to_string();
    for s in v {
        out.replace_range(s.hide.clone(), &s.shown);
    }
    out
}

fn keyword_settings(t: &str) -> Result<Vec<Setting>> {
    let b = t.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let ks = i;
        while i < b.len() && b[i] != b'=' && !b[i].is_ascii_whitespace() {
            i += 1;
        }
        let key = t[ks..i].to_string();
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() || b[i] != b'=' {
            // The word is not shown: it may be the rest of a password written with a space.
            bail!(
                "the DSN is not valid: the word at character {} has no \"=\" (write key=value \
                 settings; quote a value holding spaces: password='a b')",
                ks + 1
            );
        }
        i += 1;
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let mut val = Vec::new();
        if i < b.len() && b[i] == b'\'' {
            i += 1;
            loop {
                if i >= b.len() {
                    bail!("the DSN is not valid: unterminated quoted value of \"{key}\"");
                }
                match b[i] {
                    b'\'' => {
                        i += 1;
                        break;
                    }
                    b'\\' if i + 1 < b.len() => {
                        val.push(b[i + 1]);
                        i += 2;
                    }
                    c => {
                        val.push(c);
                        i += 1;
                    }
                }
            }
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                if b[i] == b'\\' && i + 1 < b.len() {
                    i += 1;
                }
                val.push(b[i]);
                i += 1;
            }
        }
        out.push(Setting {
            shown: format!("{key}=***"),
            key,
            value: String::from_utf8_lossy(&val).into_owned(),
            hide: ks..i,
        });
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Result<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| anyhow!("the DSN is not valid: bad percent-encoding in the URL"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// A URL's settings, split as libpq splits it (`conninfo_uri_parse_options`): user information
/// up to the first `@` before any `/` (a `?` or `#` in a password stays in it), then hosts up to
/// `/` or `?`, the database up to `?`, then `&`-separated query settings whose keys and values
/// are percent-decoded.
fn url_settings(url: &str) -> Result<Vec<Setting>> {
    let mut out = Vec::new();
    let base = url.find("://").map(|i| i + 3).unwrap_or(0);
    let rest = &url[base..];
    let mut at = 0;
    if let Some(e) = rest
        .find(['@', '/'])
        .filter(|&e| rest.as_bytes()[e] == b'@')
    {
        let userinfo = &rest[..e];
        let (user, pw) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => (userinfo, None),
        };
        if !user.is_empty() {
            out.push(Setting {
                key: "user".into(),
                value: percent_decode(user)?,
                hide: base..base,
                shown: String::new(),
            });
        }
        if let Some(p) = pw {
            let s = base + user.len() + 1;
            out.push(Setting {
                key: "password".into(),
                value: percent_decode(p)?,
                hide: s..s + p.len(),
                shown: "***".into(),
            });
        }
        at = e + 1;
    }
    let rest = &rest[at..];
    let (main, query) = match rest.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (rest, None),
    };
    let (hosts, path) = match main.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (main, None),
    };
    let mut put = |key: &str, value: String| {
        out.push(Setting {
            key: key.into(),
            value,
            hide: 0..0,
            shown: String::new(),
        })
    };
    if !hosts.is_empty() {
        let mut hs = Vec::new();
        let mut ps = Vec::new();
        for h in hosts.split(',') {
            // [v6]:port or name:port
            let (host, port) = if let Some(end) = h.strip_prefix('[').and_then(|x| x.find(']')) {
                let host = &h[1..end + 1];
                let port = h[end + 2..].strip_prefix(':').unwrap_or("");
                (host, port)
            } else {
                match h.rsplit_once(':') {
                    Some((host, port)) => (host, port),
                    None => (h, ""),
                }
            };
            hs.push(percent_decode(host)?);
            ps.push(port.to_string());
        }
        if hs.iter().any(|h| !h.is_empty()) {
            put("host", hs.join(","));
        }
        if ps.iter().any(|p| !p.is_empty()) {
            put("port", ps.join(","));
        }
    }
    if let Some(p) = path.filter(|p| !p.is_empty()) {
        put("dbname", percent_decode(p)?);
    }
    if let Some(q) = query {
        let qs = url.len() - q.len();
        let mut pos = qs;
        for kv in q.split('&') {
            let start = pos;
            pos += kv.len() + 1;
            if kv.is_empty() {
                continue;
            }
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            out.push(Setting {
                key: percent_decode(k)?,
                value: percent_decode(v)?,
                hide: start..start + kv.len(),
                shown: format!("{k}=***"),
            });
        }
    }
    Ok(out)
}

/// Quote a value for libpq's `key = value` form.
fn quote(v: &str) -> String {
    let mut s = String::with_capacity(v.len() + 2);
    s.push('\'');
    for c in v.chars() {
        if c == '\'' || c == '\\' {
            s.push('\\');
        }
        s.push(c);
    }
    s.push('\'');
    s
}

/// The environment variable of each parameter iolens takes from the environment.
const ENV: &[(&str, &str)] = &[
    ("host", "PGHOST"),
    ("hostaddr", "PGHOSTADDR"),
    ("port", "PGPORT"),
    ("dbname", "PGDATABASE"),
    ("user", "PGUSER"),
    ("password", "PGPASSWORD"),
    ("passfile", "PGPASSFILE"),
    ("options", "PGOPTIONS"),
    ("application_name", "PGAPPNAME"),
    ("connect_timeout", "PGCONNECT_TIMEOUT"),
    ("sslmode", "PGSSLMODE"),
    ("target_session_attrs", "PGTARGETSESSIONATTRS"),
];

/// The effective OS user's name and home directory (libpq's defaults for user and `~`).
fn os_user() -> (Option<String>, Option<PathBuf>) {
    // SAFETY: getpwuid_r into buffers we own.
    unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16384];
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(
            libc::geteuid(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut out,
        );
        if rc != 0 || out.is_null() {
            return (None, None);
        }
        let name = std::ffi::CStr::from_ptr(pw.pw_name)
            .to_string_lossy()
            .into_owned();
        let home = std::ffi::CStr::from_ptr(pw.pw_dir)
            .to_string_lossy()
            .into_owned();
        (Some(name), Some(PathBuf::from(home)))
    }
}

/// libpq's default Unix socket directory (Debian and its derivatives build libpq with
/// `/var/run/postgresql`; upstream's default is `/tmp`).
pub(crate) fn default_socket_dir() -> &'static str {
    if Path::new("/var/run/postgresql").is_dir() {
        "/var/run/postgresql"
    } else {
        "/tmp"
    }
}

/// Resolve `dsn` by libpq's rules, reading the environment through `env`.
pub fn resolve_with(dsn: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Resolved> {
    let given = dsn_params(dsn)?;
    let env = |k: &str| env(k).filter(|v| !v.is_empty());
    if given.contains_key("service") || env("PGSERVICE").is_some() {
        bail!(
            "connection services (service= or PGSERVICE) are not supported by iolens; give the \
             parameters in --dsn or the PG* environment variables"
        );
    }
    let mut p: BTreeMap<String, String> = BTreeMap::new();
    for (k, var) in ENV {
        if let Some(v) = given.get(*k) {
            p.insert(k.to_string(), v.clone());
        } else if let Some(v) = env(var) {
            p.insert(k.to_string(), v);
        }
    }
    // Everything else in the DSN goes to the crate as it is.
    for (k, v) in &given {
        p.entry(k.clone()).or_insert_with(|| v.clone());
    }
    // libpq's defaults.
    let (os_name, os_home) = os_user();
    if !p.contains_key("host") && !p.contains_key("hostaddr") {
        p.insert("host".into(), default_socket_dir().into());
    }
    if !p.contains_key("user") {
        let u = os_name.ok_or_else(|| {
            anyhow!("no PostgreSQL user given (user= or PGUSER) and the OS user has no name")
        })?;
        p.insert("user".into(), u);
    }
    if !p.contains_key("dbname") {
        let u = p["user"].clone();
        p.insert("dbname".into(), u);
    }
    match p.get("sslmode").map(String::as_str) {
        None | Some("disable") | Some("allow") | Some("prefer") => {}
        Some(m @ ("require" | "verify-ca" | "verify-full")) => bail!(
            "sslmode={m} cannot be honoured: iolens connects to PostgreSQL without TLS (use a \
             Unix socket or a trusted network, with sslmode=disable or prefer)"
        ),
        Some(m) => bail!("invalid sslmode \"{m}\""),
    }
    let mut warnings = Vec::new();
    let mut password = if given.get("password").is_some_and(|v| !v.is_empty()) {
        PasswordSource::Dsn
    } else if p.get("password").is_some_and(|v| !v.is_empty()) {
        PasswordSource::Env
    } else {
        PasswordSource::None
    };
    let passfile = p.remove("passfile");
    if password == PasswordSource::None {
        let file = match passfile {
            Some(f) => Some(PathBuf::from(f)),
            None => env("HOME")
                .map(PathBuf::from)
                .or(os_home)
                .map(|h| h.join(".pgpass")),
        };
        if let Some(file) = file {
            let host = p
                .get("host")
                .and_then(|h| h.split(',').next())
                .filter(|h| !h.is_empty())
                .or_else(|| p.get("hostaddr").and_then(|h| h.split(',').next()))
                .unwrap_or("")
                .to_string();
            let port = p
                .get("port")
                .and_then(|x| x.split(',').next())
                .unwrap_or("")
                .to_string();
            match password_from_file(&file, &host, &port, &p["dbname"], &p["user"]) {
                Ok(Some(pw)) => {
                    p.insert("password".into(), pw);
                    password = PasswordSource::File(file);
                }
                Ok(None) => {}
                Err(w) => warnings.push(w),
            }
        }
    }
    let config = to_config(&p)?;
    Ok(Resolved {
        config,
        password,
        warnings,
    })
}

/// Resolve `dsn` by libpq's rules with the process environment.
pub fn resolve(dsn: &str) -> Result<Resolved> {
    resolve_with(dsn, &|k| std::env::var(k).ok())
}

fn to_config(p: &BTreeMap<String, String>) -> Result<Config> {
    let mut c = Config::new();
    for (k, v) in p {
        match k.as_str() {
            "host" => {
                for h in v.split(',') {
                    c.host(h);
                }
            }
            "hostaddr" => {
                for h in v.split(',') {
                    c.hostaddr(
                        h.parse()
                            .map_err(|_| anyhow!("hostaddr \"{h}\" is not an IP address"))?,
                    );
                }
            }
            "port" => {
                for x in v.split(',') {
                    c.port(if x.is_empty() {
                        DEFAULT_PORT
                    } else {
                        x.parse()
                            .map_err(|_| anyhow!("port \"{x}\" is not a port number"))?
                    });
                }
            }
            "dbname" => {
                c.dbname(v);
            }
            "user" => {
                c.user(v);
            }
            "password" => {
                c.password(v.as_bytes());
            }
            "options" => {
                c.options(v);
            }
            "application_name" => {
                c.application_name(v);
            }
            "connect_timeout" => {
                let s: i64 = v
                    .trim()
                    .parse()
                    .map_err(|_| anyhow!("connect_timeout \"{v}\" is not a number of seconds"))?;
                // libpq: zero or negative waits forever; 1 is raised to 2 seconds.
                if s > 0 {
                    c.connect_timeout(Duration::from_secs(s.max(2) as u64));
                }
            }
            "sslmode" => {
                c.ssl_mode(if v == "prefer" {
                    SslMode::Prefer
                } else {
                    SslMode::Disable
                });
            }
            "target_session_attrs" => {
                c.target_session_attrs(match v.as_str() {
                    "any" => TargetSessionAttrs::Any,
                    "read-write" => TargetSessionAttrs::ReadWrite,
                    "read-only" => TargetSessionAttrs::ReadOnly,
                    other => bail!("target_session_attrs \"{other}\" is not supported by iolens"),
                });
            }
            _ => {
                // Leave anything else to the crate's own parser (keepalives, …): it names what
                // it does not know.
                let one: Config = format!("{k}={}", quote(v))
                    .parse()
                    .map_err(|e| anyhow!("the DSN is not valid: {e}"))?;
                merge_extra(&mut c, &one, k);
            }
        }
    }
    Ok(c)
}

/// Copy the one parameter `key` that `from` was parsed from into `c`.
fn merge_extra(c: &mut Config, from: &Config, key: &str) {
    match key {
        "keepalives" => {
            c.keepalives(from.get_keepalives());
        }
        "keepalives_idle" => {
            c.keepalives_idle(from.get_keepalives_idle());
        }
        "keepalives_interval" => {
            if let Some(d) = from.get_keepalives_interval() {
                c.keepalives_interval(d);
            }
        }
        "keepalives_retries" => {
            if let Some(n) = from.get_keepalives_retries() {
                c.keepalives_retries(n);
            }
        }
        "tcp_user_timeout" => {
            if let Some(d) = from.get_tcp_user_timeout() {
                c.tcp_user_timeout(*d);
            }
        }
        "channel_binding" => {
            c.channel_binding(from.get_channel_binding());
        }
        "load_balance_hosts" => {
            c.load_balance_hosts(from.get_load_balance_hosts());
        }
        _ => {}
    }
}

/// Match one field of a password-file line against `token` (libpq's `pwdfMatchesString`):
/// `*` followed by `:` matches anything; otherwise the field, with `\` escaping the next
/// character, must equal `token` and end with an unescaped `:`. Returns the rest of the line.
fn field_matches<'a>(line: &'a [u8], token: &[u8]) -> Option<&'a [u8]> {
    if line.len() >= 2 && line[0] == b'*' && line[1] == b':' {
        return Some(&line[2..]);
    }
    let mut i = 0;
    let mut t = 0;
    while i < line.len() {
        let mut escaped = false;
        if line[i] == b'\\' {
            i += 1;
            escaped = true;
            if i >= line.len() {
                return None;
            }
        }
        if line[i] == b':' && t == token.len() && !escaped {
            return Some(&line[i + 1..]);
        }
        if t == token.len() || line[i] != token[t] {
            return None;
        }
        i += 1;
        t += 1;
    }
    None
}

/// The password a password-file line gives: up to the first unescaped `:`, with `\` escapes
/// removed.
fn unescape_password(rest: &[u8]) -> String {
    let mut out = Vec::with_capacity(rest.len());
    let mut i = 0;
    while i < rest.len() && rest[i] != b':' {
        if rest[i] == b'\\' && i + 1 < rest.len() {
            i += 1;
        }
        out.push(rest[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Look a password up in a libpq password file for `host` (a name, an address, or a socket
/// directory), `port` ("" = 5432), `dbname` and `user`. `Ok(None)`: no file or no matching line;
/// `Err(warning)`: the file exists but is ignored (not a plain file, or group/world access).
pub fn password_from_file(
    file: &Path,
    host: &str,
    port: &str,
    dbname: &str,
    user: &str,
) -> std::result::Result<Option<String>, String> {
    use std::os::unix::fs::PermissionsExt;
    if dbname.is_empty() || user.is_empty() {
        return Ok(None);
    }
    // 'localhost' matches an empty host or the default socket directory.
    let host = if host.is_empty() || (host.starts_with('/') && host == default_socket_dir()) {
        "localhost"
    } else {
        host
    };
    let port = if port.is_empty() { "5432" } else { port };
    // libpq stats the file (following links): a missing file is silently ignored.
    let Ok(md) = std::fs::metadata(file) else {
        return Ok(None);
    };
    if !md.is_file() {
        return Err(format!(
            "WARNING: password file \"{}\" is not a plain file",
            file.display()
        ));
    }
    if md.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "WARNING: password file \"{}\" has group or world access; permissions should be \
             u=rw (0600) or less",
            file.display()
        ));
    }
    let Ok(data) = std::fs::read(file) else {
        return Ok(None);
    };
    for raw in data.split(|&b| b == b'\n') {
        let mut line = raw;
        while let Some((&last, head)) = line.split_last() {
            if last == b'\r' || last == b'\n' {
                line = head;
            } else {
                break;
            }
        }
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let rest = field_matches(line, host.as_bytes())
            .and_then(|r| field_matches(r, port.as_bytes()))
            .and_then(|r| field_matches(r, dbname.as_bytes()))
            .and_then(|r| field_matches(r, user.as_bytes()));
        if let Some(rest) = rest {
            return Ok(Some(unescape_password(rest)));
        }
    }
    Ok(None)
}

/// The hosts of a resolved configuration, for messages.
pub(crate) fn describe_hosts(c: &Config) -> String {
    c.get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(n) => n.clone(),
            Host::Unix(p) => p.display().to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_match_like_libpq() {
        assert_eq!(field_matches(b"*:rest", b"x"), Some(&b"rest"[..]));
        assert_eq!(field_matches(b"db1:rest", b"db1"), Some(&b"rest"[..]));
        assert_eq!(field_matches(b"db1:rest", b"db"), None);
        assert_eq!(field_matches(b"db:rest", b"db1"), None);
        assert_eq!(field_matches(b"a\\:b:rest", b"a:b"), Some(&b"rest"[..]));
        assert_eq!(field_matches(b"a\\\\:rest", b"a\\"), Some(&b"rest"[..]));
        // A literal star only matches a star when more follows it.
        assert_eq!(field_matches(b"*x:rest", b"*x"), Some(&b"rest"[..]));
        assert_eq!(unescape_password(b"p\\:w\\\\d:ignored"), "p:w\\d");
    }

    #[test]
    fn dsn_params_of_both_forms() {
        let p = dsn_params("host=/tmp  dbname = 'a b\\'c' user=me").unwrap();
        assert_eq!(p["host"], "/tmp");
        assert_eq!(p["dbname"], "a b'c");
        assert_eq!(p["user"], "me");
        let u = dsn_params("postgresql://me:s%40cret@db1:5433,db2/x?sslmode=disable").unwrap();
        assert_eq!(u["user"], "me");
        assert_eq!(u["password"], "s@cret");
        assert_eq!(u["host"], "db1,db2");
        assert_eq!(u["port"], "5433,");
        assert_eq!(u["dbname"], "x");
        assert_eq!(u["sslmode"], "disable");
        assert!(dsn_params("host").is_err());
    }

    #[test]
    fn environment_fills_what_the_dsn_leaves_out() {
        let env = |k: &str| -> Option<String> {
            match k {
                "PGHOST" => Some("envhost".into()),
                "PGPORT" => Some("6543".into()),
                "PGUSER" => Some("envuser".into()),
                "PGPASSWORD" => Some("envpw".into()),
                "PGDATABASE" => Some("envdb".into()),
                "PGSSLMODE" => Some("disable".into()),
                _ => None,
            }
        };
        let r = resolve_with("host=dsnhost user=dsnuser", &env).unwrap();
        assert_eq!(describe_hosts(&r.config), "dsnhost");
        assert_eq!(r.config.get_ports(), &[6543]);
        assert_eq!(r.config.get_user(), Some("dsnuser"));
        assert_eq!(r.config.get_dbname(), Some("envdb"));
        assert_eq!(r.config.get_password(), Some(&b"envpw"[..]));
        assert_eq!(r.password, PasswordSource::Env);
        let r = resolve_with("", &env).unwrap();
        assert_eq!(describe_hosts(&r.config), "envhost");
        assert!(resolve_with("sslmode=require", &|_| None).is_err());
        assert!(resolve_with("", &|k| (k == "PGSERVICE").then(|| "x".into())).is_err());
    }
}
