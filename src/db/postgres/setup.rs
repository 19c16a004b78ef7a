//! `db setup` and `db drop` on PostgreSQL: the layout's tables, their load through the shared
//! loop ([`crate::db::load`]) by binary COPY, the key index, VACUUM, and the layout check read
//! from the rows' physical addresses.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use postgres::binary_copy::BinaryCopyInWriter;
use postgres::types::Type;
use postgres::Client;

use super::errors::{connect, PgCtx};
use super::tablespace::{self, Space};
use super::{CHUNK, FORMAT, PAD_BYTES};
use crate::db::load::{load_and_check, print_checks, LoadState, Loader, Rows};
use crate::db::{host, Layout, LayoutCheck, SetupOutcome, BLOCK};
use crate::units::fmt_bytes;

pub(super) fn read_state(c: &mut Client) -> Result<Option<(Layout, Vec<LoadState>)>> {
    let exists: bool = c
        .query_one("SELECT to_regclass('iolens_meta') IS NOT NULL", &[])
        .pg("cannot query the catalog")?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let rows = c
        .query("SELECT key, value FROM iolens_meta", &[])
        .pg("cannot read iolens_meta")?;
    let meta: BTreeMap<String, String> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    if meta.get("format").map(String::as_str) != Some(FORMAT) {
        bail!("the database has an iolens_meta table but not the {FORMAT} layout");
    }
    let layout: Layout = serde_json::from_str(meta.get("layout").map(String::as_str).unwrap_or(""))
        .context("iolens_meta layout is damaged")?;
    let prog = c
        .query(
            "SELECT schema, loaded, indexed, checked IS NOT NULL FROM iolens_progress ORDER BY schema",
            &[],
        )
        .pg("cannot read iolens_progress")?
        .iter()
        .map(|r| LoadState {
            schema: r.get::<_, i32>(0) as u32,
            loaded: r.get::<_, i64>(1) as u64,
            indexed: r.get(2),
            checked: r.get(3),
        })
        .collect();
    Ok(Some((layout, prog)))
}

/// The server's data directory when this role may read it and it is on this host.
pub(super) fn local_data_dir(c: &mut Client) -> Option<String> {
    let r = c
        .query_one("SELECT current_setting('data_directory')", &[])
        .ok()?;
    let d: String = r.get(0);
    Path::new(&d).exists().then_some(d)
}

/// Build, resume or re-verify the layout. `max_rows` bounds the rows this call loads. With
/// `dirs`, a new layout's tables are placed in one tablespace per directory
/// ([`tablespace`]); a resumed one must be given the same directories, or none.
pub fn setup(
    dsn: &str,
    dirs: &[std::path::PathBuf],
    layout: &Layout,
    max_rows: Option<u64>,
    progress: bool,
) -> Result<SetupOutcome> {
    let mut c = connect(dsn)?;
    let state = read_state(&mut c)?;
    let already = match &state {
        Some((l, p)) => {
            if l != layout {
                bail!(
                    "the database holds a different iolens layout ({} schemas × {} rows, seed {}); \
                     use the same --schemas/--scale/--seed, or remove it with `iolens db drop \
                     --engine postgres --dsn ...`",
                    l.schemas,
                    l.rows,
                    l.seed
                );
            }
            p.iter().map(|p| p.loaded).sum::<u64>()
        }
        None => 0,
    };
    if state.is_none() && !dirs.is_empty() && (layout.schemas as usize) < dirs.len() {
        bail!(
            "--schemas {} is fewer than the {} directories: schema s lives in directory s mod {}, \
             so every directory needs at least one (a multiple of {} spreads them evenly)",
            layout.schemas,
            dirs.len(),
            dirs.len(),
            dirs.len()
        );
    }
    let total = layout.schemas as u64 * layout.rows;
    let need = (total - already.min(total)) * BLOCK * 110 / 100 + total * 40 + (16 << 20);
    // Over tablespaces the data lies in the directories, each its share of the schemas.
    if state.is_none() && !dirs.is_empty() {
        let n = dirs.len() as u64;
        let per_dir = |k: u64| {
            let schemas = (layout.schemas as u64 + n - 1 - k) / n;
            schemas * layout.rows * BLOCK * 110 / 100 + schemas * layout.rows * 40
        };
        let most = per_dir(0);
        let check = |d: &Path| -> Result<()> {
            let free = host::free_bytes(d)?;
            if most > free {
                bail!(
                    "{} has {} free, and its share of the layout needs about {}; nothing was \
                     created",
                    d.display(),
                    fmt_bytes(free),
                    fmt_bytes(most)
                );
            }
            Ok(())
        };
        let spaces = tablespace::create(&mut c, dirs, &check)?;
        if let Err(e) = create_schema(&mut c, layout, &spaces) {
            let _ = tablespace::remove(&mut c, &spaces);
            return Err(e);
        }
        return load(dsn, &mut c, layout, spaces, max_rows, progress);
    }
    let spaces = match &state {
        Some(_) => {
            let spaces = tablespace::read_spaces(&mut c)?;
            tablespace::check_existing(&mut c, &spaces, dirs)?;
            spaces
        }
        None => Vec::new(),
    };
    match local_data_dir(&mut c) {
        Some(d) => {
            let free = host::free_bytes(Path::new(&d))?;
            if need > free {
                bail!(
                    "--scale {} × {} schemas needs about {} more in the server's data directory, \
                     but only {} is free there{}",
                    fmt_bytes(layout.rows * BLOCK),
                    layout.schemas,
                    fmt_bytes(need),
                    fmt_bytes(free),
                    if state.is_some() {
                        "; the partial iolens tables were left as they are"
                    } else {
                        "; nothing was created"
                    }
                );
            }
        }
        None => {
            if progress {
                crate::outln!(
                    "note: cannot see the server's data directory from here; free space not checked \
                     (about {} needed)",
                    fmt_bytes(need)
                );
            }
        }
    }
    if state.is_none() {
        create_schema(&mut c, layout, &[])?;
    }
    load(dsn, &mut c, layout, spaces, max_rows, progress)
}

/// Load, index and check what is left of the layout (its tables made).
fn load(
    dsn: &str,
    c: &mut Client,
    layout: &Layout,
    spaces: Vec<Space>,
    max_rows: Option<u64>,
    progress: bool,
) -> Result<SetupOutcome> {
    let mut loader = PgLoader { c, spaces };
    match load_and_check(&mut loader, layout, max_rows, progress) {
        Ok(o) => {
            if progress {
                if o.complete {
                    print_checks(&o.checks, "TOAST pages", "key/block");
                    crate::outln!(
                        "setup complete: {} schemas × {} verified",
                        layout.schemas,
                        fmt_bytes(layout.rows * BLOCK)
                    );
                } else {
                    crate::outln!("setup paused after {} rows; rerun to resume", o.rows_loaded);
                }
            }
            Ok(o)
        }
        Err(e) => {
            let st = connect(dsn)
                .ok()
                .and_then(|mut c| read_state(&mut c).ok().flatten())
                .map(|(_, p)| {
                    p.iter()
                        .map(|p| {
                            format!("iolens_t{}: {} of {} rows", p.schema, p.loaded, layout.rows)
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_else(|| "state unknown".to_string());
            Err(e.context(format!(
                "setup stopped; the partial iolens tables remain ({st}): rerun the same command \
                 to resume, or remove them with `iolens db drop --engine postgres --dsn ...`"
            )))
        }
    }
}

/// The clause placing schema `s`'s table or index in its tablespace (none: the default).
fn in_space(spaces: &[Space], s: u32) -> String {
    match spaces {
        [] => String::new(),
        _ => format!(" TABLESPACE {}", spaces[s as usize % spaces.len()].name),
    }
}

pub(super) fn create_schema(c: &mut Client, layout: &Layout, spaces: &[Space]) -> Result<()> {
    let mut tx = c.transaction().pg("cannot start a transaction")?;
    let mut ddl = String::from(
        "CREATE TABLE iolens_meta(key text PRIMARY KEY, value text NOT NULL);
         CREATE TABLE iolens_progress(schema int PRIMARY KEY, loaded bigint NOT NULL,
                                      indexed boolean NOT NULL, checked text);",
    );
    for s in 0..layout.schemas {
        ddl.push_str(&format!(
            "CREATE TABLE iolens_t{s}(k bigint NOT NULL, v bigint NOT NULL, pad bytea NOT NULL)
               WITH (fillfactor = 50, autovacuum_enabled = off){};
             ALTER TABLE iolens_t{s} ALTER COLUMN pad SET STORAGE PLAIN;
             INSERT INTO iolens_progress VALUES ({s}, 0, false, NULL);",
            in_space(spaces, s)
        ));
    }
    tx.batch_execute(&ddl)
        .pg("cannot create the iolens tables")?;
    tx.execute(
        "INSERT INTO iolens_meta VALUES ('format', $1), ('layout', $2)",
        &[&FORMAT, &serde_json::to_string(layout)?],
    )
    .pg("cannot write iolens_meta")?;
    if !spaces.is_empty() {
        tx.execute(
            "INSERT INTO iolens_meta VALUES ('tablespaces', $1)",
            &[&serde_json::to_string(spaces)?],
        )
        .pg("cannot write iolens_meta")?;
    }
    tx.commit().pg("cannot create the iolens tables")?;
    Ok(())
}

/// The shared load loop's PostgreSQL side: COPY in binary chunks, then VACUUM (ANALYZE).
pub(super) struct PgLoader<'c> {
    c: &'c mut Client,
    /// The layout's tablespaces (none: the default).
    spaces: Vec<Space>,
}

impl Loader for PgLoader<'_> {
    const CHUNK: u64 = CHUNK;
    const PAD_BYTES: usize = PAD_BYTES;

    fn state(&mut self) -> Result<Vec<LoadState>> {
        Ok(read_state(self.c)?.context("iolens_meta vanished")?.1)
    }

    fn table(&self, s: u32) -> String {
        format!("iolens_t{s}")
    }

    fn load_chunk(&mut self, s: u32, first: u64, n: u64, rows: &mut Rows) -> Result<()> {
        let mut tx = self.c.transaction().pg("cannot start a transaction")?;
        {
            let sink = tx
                .copy_in(&format!(
                    "COPY iolens_t{s} (k, v, pad) FROM STDIN (FORMAT binary)"
                ))
                .pg("cannot start COPY")?;
            let mut w = BinaryCopyInWriter::new(sink, &[Type::INT8, Type::INT8, Type::BYTEA]);
            for i in first..first + n {
                let (k, pad) = rows.row(i);
                w.write(&[&k, &0i64, &pad]).pg("COPY failed")?;
            }
            w.finish().pg("COPY failed")?;
        }
        tx.execute(
            "UPDATE iolens_progress SET loaded = $1 WHERE schema = $2",
            &[&((first + n) as i64), &(s as i32)],
        )
        .pg("cannot record progress")?;
        tx.commit().pg("cannot commit loaded rows")
    }

    fn index_name(&self, s: u32) -> String {
        format!("iolens_t{s}_k")
    }

    fn build_index(&mut self, s: u32) -> Result<()> {
        let mut tx = self.c.transaction().pg("cannot start a transaction")?;
        tx.batch_execute(&format!(
            "CREATE INDEX IF NOT EXISTS iolens_t{s}_k ON iolens_t{s}(k){};
             UPDATE iolens_progress SET indexed = true WHERE schema = {s};",
            in_space(&self.spaces, s)
        ))
        .pg("cannot build the index")?;
        tx.commit().pg("cannot build the index")
    }

    fn loaded(&mut self, st: &LoadState) -> Result<()> {
        if !st.checked {
            let s = st.schema;
            self.c
                .batch_execute(&format!("VACUUM (ANALYZE) iolens_t{s}"))
                .pg("VACUUM failed")?;
        }
        Ok(())
    }

    fn check(&mut self, s: u32) -> Result<LayoutCheck> {
        check_schema(self.c, s)
    }

    fn record_check(&mut self, s: u32, k: &LayoutCheck) -> Result<()> {
        self.c
            .execute(
                "UPDATE iolens_progress SET checked = $1 WHERE schema = $2",
                &[&serde_json::to_string(k)?, &(s as i32)],
            )
            .pg("cannot record the check")?;
        Ok(())
    }
}

/// Verify one schema's layout from the rows' physical addresses (ctid).
pub(crate) fn check_schema(c: &mut Client, s: u32) -> Result<LayoutCheck> {
    let t = format!("iolens_t{s}");
    let q = format!(
        "WITH b AS (SELECT k, (ctid::text::point)[0]::bigint AS blk FROM {t}),
              per AS (SELECT count(*) AS n FROM b GROUP BY blk),
              adj AS (SELECT abs(blk - lag(blk) OVER (ORDER BY k)) AS d FROM b)
         SELECT (SELECT count(*) FROM b), (SELECT count(*) FROM per),
                (SELECT coalesce(max(n), 0) FROM per),
                (SELECT coalesce(corr(k, blk), 0) FROM b),
                (SELECT count(*) FILTER (WHERE d <= 1) FROM adj),
                (SELECT coalesce(pg_relation_size(NULLIF(reltoastrelid, 0)), 0) / 8192
                   FROM pg_class WHERE oid = '{t}'::regclass),
                (SELECT count(*) FROM pg_indexes WHERE tablename = '{t}' AND indexname = '{t}_k')"
    );
    let r = c.query_one(&q, &[]).pg("cannot verify the layout")?;
    let rows: i64 = r.get(0);
    let adjacent: i64 = r.get(4);
    Ok(LayoutCheck {
        schema: s,
        rows: rows as u64,
        blocks: r.get::<_, i64>(1) as u64,
        max_rows_per_block: r.get::<_, i64>(2) as u64,
        key_position_corr: r.get(3),
        overflow_pages: r.get::<_, i64>(5) as u64,
        index_present: r.get::<_, i64>(6) > 0,
        adjacent_share: if rows > 1 {
            adjacent as f64 / (rows - 1) as f64
        } else {
            0.0
        },
    })
}

/// Drop every table `setup` created.
pub(crate) fn drop_layout(dsn: &str) -> Result<()> {
    let mut c = connect(dsn)?;
    let Some((layout, _)) = read_state(&mut c)? else {
        bail!("the database has no iolens tables (nothing to drop)");
    };
    let spaces = tablespace::read_spaces(&mut c)?;
    let mut tx = c.transaction().pg("cannot start a transaction")?;
    let mut ddl = String::new();
    for s in 0..layout.schemas {
        ddl.push_str(&format!("DROP TABLE IF EXISTS iolens_t{s};"));
    }
    ddl.push_str("DROP TABLE iolens_progress; DROP TABLE iolens_meta;");
    tx.batch_execute(&ddl).pg("cannot drop the iolens tables")?;
    tx.commit().pg("cannot drop the iolens tables")?;
    // DROP TABLESPACE cannot run in a transaction: after the tables are gone.
    tablespace::remove(&mut c, &spaces)?;
    crate::outln!(
        "dropped {} iolens tables{}",
        layout.schemas,
        match spaces.len() {
            0 => String::new(),
            n => format!(" and their {n} tablespaces"),
        }
    );
    Ok(())
}
