//! Tests of the results model: reading, upgrading and refusing documents.

use super::*;

#[test]
fn database_extras_are_read_into_db_and_unknown_keys_kept() {
    let r = Results::new(Kind::Db, vec!["iolens".into()]);
    let mut v = serde_json::to_value(&r).unwrap();
    v["extra"] = serde_json::json!({
        "engine": "postgres",
        "layout": {"schemas": 2, "rows": 1000, "seed": 7},
        "wait_profile": {"hz": 10.0, "samples": 20, "session_samples": 40,
                         "events": [{"event": "IO:DataFileRead", "count": 30, "share": 0.75}]},
        "from_a_newer_iolens": {"x": [1, 2]},
    });
    let back = Results::from_json(&v.to_string()).unwrap();
    let db = back.db.as_ref().unwrap();
    assert_eq!(db.engine, evidence::DbEngine::Postgres);
    assert_eq!(db.layout.rows, 1000);
    let w = db.wait_profile.as_ref().unwrap();
    assert_eq!((w.samples, w.events[0].count), (20, 30));
    assert_eq!(
        back.extra.keys().collect::<Vec<_>>(),
        ["from_a_newer_iolens"]
    );
    // Written again: typed fields in their place, the unknown key kept as it was.
    let again: serde_json::Value = serde_json::from_str(&back.to_json().unwrap()).unwrap();
    assert_eq!(again["db"]["engine"], "postgres");
    assert_eq!(
        again["extra"],
        serde_json::json!({"from_a_newer_iolens": {"x": [1, 2]}})
    );
    assert_eq!(Results::from_json(&again.to_string()).unwrap(), back);
    v["extra"]["layout"] = serde_json::json!("big");
    let err = Results::from_json(&v.to_string()).unwrap_err();
    assert!(format!("{err:#}").contains("database layout"), "{err:#}");
}

#[test]
fn a_watch_budget_in_extra_is_read_into_watch() {
    let mut r = Results::new(Kind::Watch, vec!["iolens".into(), "watch".into()]);
    r.watch = Some(WatchBudget {
        pids: vec![42],
        ..Default::default()
    });
    let mut v = serde_json::to_value(&r).unwrap();
    let budget = v.as_object_mut().unwrap().remove("watch").unwrap();
    v["extra"]["watch"] = budget;
    let back = Results::from_json(&v.to_string()).unwrap();
    assert_eq!(back.watch.unwrap().pids, vec![42]);
    assert!(back.extra.is_empty());
    v["extra"]["watch"] = serde_json::json!({"intervals": 3});
    let err = Results::from_json(&v.to_string()).unwrap_err();
    assert!(format!("{err:#}").contains("watch budget"), "{err:#}");
}

#[test]
fn rejects_foreign_newer_truncated() {
    assert!(Results::from_json("{\"a\":1}")
        .unwrap_err()
        .to_string()
        .contains("not an iolens results file"));
    let mut r = Results::new(Kind::Run, vec![]);
    r.version = SCHEMA_VERSION + 1;
    let e = Results::from_json(&r.to_json().unwrap()).unwrap_err();
    assert!(e.to_string().contains("newer"), "{e}");
    let r = Results::new(Kind::Run, vec![]);
    let j = r.to_json().unwrap();
    let e = Results::from_json(&j[..j.len() / 2]).unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
}

/// The active scheduler is the bracketed name of the sysfs line, whichever place it has;
/// a line of one name without brackets (older kernels, single-queue) is that name.
#[test]
fn the_active_scheduler_is_the_bracketed_name() {
    assert_eq!(active_scheduler("[none] mq-deadline kyber bfq"), "none");
    assert_eq!(
        active_scheduler("none [mq-deadline] kyber bfq"),
        "mq-deadline"
    );
    assert_eq!(active_scheduler("none mq-deadline [bfq]"), "bfq");
    assert_eq!(active_scheduler("none"), "none");
    assert_eq!(active_scheduler(""), "");
}
