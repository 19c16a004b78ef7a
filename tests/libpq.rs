//! libpq's conventions for PostgreSQL connections (issue 10, item 16): password files read
//! from real files with libpq's rules, and the environment's place below the DSN.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use iolens::db::libpq::{password_from_file, resolve_with, PasswordSource};

fn write_pgpass(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

const PGPASS: &str = "\
# comment lines start with #
db1.example.com:5432:sales:alice:first\\:pw
db1.example.com:*:sales:alice:not-this-one
*:5433:*:bob:star\\\\pw
localhost:5432:a\\:b:carol:colon-db\r
*:*:*:*:catch-all
";

#[test]
fn pgpass_lines_match_like_libpq() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("pgpass");
    write_pgpass(&f, PGPASS, 0o600);
    let pw = |h: &str, p: &str, db: &str, u: &str| password_from_file(&f, h, p, db, u).unwrap();
    // First matching line wins; `\:` is a colon inside the password.
    assert_eq!(
        pw("db1.example.com", "5432", "sales", "alice").as_deref(),
        Some("first:pw")
    );
    // A missing port is libpq's 5432.
    assert_eq!(
        pw("db1.example.com", "", "sales", "alice").as_deref(),
        Some("first:pw")
    );
    assert_eq!(
        pw("db1.example.com", "6000", "sales", "alice").as_deref(),
        Some("not-this-one")
    );
    // Wildcards and an escaped backslash.
    assert_eq!(
        pw("anyhost", "5433", "x", "bob").as_deref(),
        Some("star\\pw")
    );
    // `localhost` matches an empty host; an escaped colon in a field; CRLF line ends.
    assert_eq!(pw("", "5432", "a:b", "carol").as_deref(), Some("colon-db"));
    assert_eq!(pw("otherhost", "1", "d", "u").as_deref(), Some("catch-all"));
    // A field is matched whole, never as a prefix.
    assert_eq!(
        pw("db1.example.com", "5432", "sale", "alice").as_deref(),
        Some("catch-all")
    );
}

#[test]
fn pgpass_with_loose_permissions_or_not_a_file_is_ignored() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("pgpass");
    write_pgpass(&f, "*:*:*:*:secret\n", 0o644);
    let w = password_from_file(&f, "h", "5432", "d", "u").unwrap_err();
    assert!(w.contains("group or world access"), "{w}");
    write_pgpass(&f, "*:*:*:*:secret\n", 0o640);
    assert!(password_from_file(&f, "h", "5432", "d", "u").is_err());
    write_pgpass(&f, "*:*:*:*:secret\n", 0o400);
    assert_eq!(
        password_from_file(&f, "h", "5432", "d", "u")
            .unwrap()
            .as_deref(),
        Some("secret")
    );
    let w = password_from_file(d.path(), "h", "5432", "d", "u").unwrap_err();
    assert!(w.contains("not a plain file"), "{w}");
    assert_eq!(
        password_from_file(&d.path().join("missing"), "h", "5432", "d", "u").unwrap(),
        None
    );
}

#[test]
fn environment_and_password_file_fill_what_the_dsn_leaves_out() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("pgpass");
    write_pgpass(&f, "dbhost:5440:prod:app:from-file\n*:*:*:*:wrong\n", 0o600);
    let fs = f.to_str().unwrap().to_string();
    let env = move |k: &str| -> Option<String> {
        match k {
            "PGHOST" => Some("dbhost".into()),
            "PGPORT" => Some("5440".into()),
            "PGUSER" => Some("app".into()),
            "PGDATABASE" => Some("prod".into()),
            "PGPASSFILE" => Some(fs.clone()),
            _ => None,
        }
    };
    // Nothing on the command line: everything from the environment and the password file.
    let r = resolve_with("", &env).unwrap();
    assert_eq!(r.config.get_password(), Some(&b"from-file"[..]));
    assert_eq!(r.password, PasswordSource::File(f.clone()));
    assert_eq!(r.config.get_ports(), &[5440]);
    // The DSN wins over the environment, and the password file is matched against the result.
    let r = resolve_with("dbname=other", &env).unwrap();
    assert_eq!(r.config.get_dbname(), Some("other"));
    assert_eq!(r.config.get_password(), Some(&b"wrong"[..]));
    // A password in the DSN or PGPASSWORD means the file is not read.
    let r = resolve_with("password=given", &env).unwrap();
    assert_eq!(r.config.get_password(), Some(&b"given"[..]));
    assert_eq!(r.password, PasswordSource::Dsn);
    // A loose password file is ignored with libpq's warning.
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = resolve_with("", &env).unwrap();
    assert_eq!(r.password, PasswordSource::None);
    assert!(r.warnings[0].contains("permissions should be u=rw (0600) or less"));
}
