//! A database of the PostgreSQL test server for one test: created fresh, and dropped at the end
//! with the tablespaces iolens made for it (`iolens_ts_<its oid>_<i>`), whatever the test left.

use postgres::{Client, NoTls};

/// A fresh database of the test server, dropped (with its tablespaces) when dropped.
pub struct TestDb {
    /// The server's DSN without a database.
    pub base: String,
    pub name: String,
}

impl TestDb {
    /// None (the test skipped, saying `what`) without a test server.
    pub fn new(name: &str, what: &str) -> Option<TestDb> {
        let base = super::pg_dsn(what)?;
        let mut c = Client::connect(&base, NoTls).expect("connect to the test server");
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        Some(TestDb {
            base,
            name: name.to_string(),
        })
    }

    pub fn dsn(&self) -> String {
        format!("{} dbname={}", self.base, self.name)
    }

    /// `db setup --engine postgres` of this database: `schemas` schemas of `scale` each, over
    /// one tablespace per directory of `dirs` (none: the default tablespace).
    pub fn setup_args(&self, schemas: u32, scale: &str, dirs: &[&std::path::Path]) -> Vec<String> {
        let mut a: Vec<String> = ["db", "setup", "--engine", "postgres", "--dsn", &self.dsn()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        a.extend([
            "--schemas".into(),
            schemas.to_string(),
            "--scale".into(),
            scale.into(),
        ]);
        for d in dirs {
            a.extend(["--dir".into(), d.display().to_string()]);
        }
        a
    }

    pub fn client(&self) -> Client {
        Client::connect(&self.dsn(), NoTls).unwrap()
    }

    /// The tablespaces of this database's layouts (named iolens_ts_<its oid>_<i>).
    pub fn spaces(&self) -> Vec<String> {
        self.try_spaces().expect("list the tablespaces")
    }

    fn try_spaces(&self) -> Result<Vec<String>, postgres::Error> {
        let mut c = Client::connect(&self.base, NoTls)?;
        Ok(c.query(
            "SELECT spcname::text FROM pg_tablespace WHERE spcname LIKE 'iolens_ts_' || \
             (SELECT oid FROM pg_database WHERE datname = $1)::text || '_%' ORDER BY 1",
            &[&self.name],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect())
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // iolens' own drop removes the tables and tablespaces; whatever a failed test left is
        // removed here (a tablespace only once the database that used it is gone).
        let spaces = self.try_spaces().unwrap_or_default();
        if let Ok(mut c) = Client::connect(&self.base, NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
            for s in spaces {
                let _ = c.batch_execute(&format!("DROP TABLESPACE IF EXISTS {s}"));
            }
        }
    }
}
