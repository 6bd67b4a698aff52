//! The real `sluice` binary's `trace convert` and `trace stats`: formats told
//! by content, round trips through files, a bad file's `file:line: what`
//! with nothing half written, `--skip-bad`, and the quantised-timestamp
//! warning.

use serde_json::Value;

use crate::cli::sluice;
use crate::support::TempDir;

const AZURE: &str = "TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:16:00.0000000,900,200
2023-11-16 18:16:01.5000000,12,3
";

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn convert_round_trips_and_stats_read_every_format() {
    let dir = TempDir::new("trace-cli");
    let azure = dir.write("azure.csv", AZURE);
    let path = |name: &str| dir.path().join(name).display().to_string();
    let (a, s, m, s2, a2) = (
        azure.display().to_string(),
        path("s.jsonl"),
        path("m.jsonl"),
        path("s2.jsonl"),
        path("a2.csv"),
    );
    // Azure → sluice → Azure is the same file; sluice → Mooncake → sluice
    // keeps arrivals and lengths. No --from: each input is told by content.
    for (from, to, format) in [
        (&a, &s, "sluice"),
        (&s, &m, "mooncake"),
        (&m, &s2, "sluice"),
        (&s, &a2, "azure"),
    ] {
        let out = sluice(args(&["trace", "convert", from, to, "--to", format])).await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(
            text(&out.stdout).ends_with(&format!("({format}): 4 rows\n")),
            "{out:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(&a2).unwrap(), AZURE);
    let rows = |file: &str| -> Vec<Value> {
        std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (first, back) = (rows(&s), rows(&s2));
    assert_eq!(first[1]["arrival_us"], 4_314_579);
    assert_eq!(first[1]["arrival"], "2023-11-16T18:15:50.995169Z");
    for (x, y) in first.iter().zip(&back) {
        assert_eq!(x["input_tokens"], y["input_tokens"]);
        assert_eq!(x["output_tokens"], y["output_tokens"]);
        // Mooncake keeps milliseconds.
        let ms = |v: &Value| (v["arrival_us"].as_u64().unwrap() + 500) / 1000;
        assert_eq!(ms(x), ms(y));
    }

    for file in [&a, &s, &m] {
        let out = sluice(args(&["trace", "stats", file, "--json"])).await;
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(stats["requests"], 4, "{stats}");
        assert_eq!(stats["input_tokens"]["max"], 900, "{stats}");
        assert!(stats["iat_cv"].as_f64().unwrap() > 0.0, "{stats}");
        assert!(
            stats.get("idc_1s").is_some() && stats["quantised"] == false,
            "{stats}"
        );
    }
    let out = sluice(args(&["trace", "stats", &a])).await;
    let shown = text(&out.stdout);
    assert!(
        shown.starts_with(&format!("{a} (azure)\nrequests         4\n")),
        "{shown}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_file_gives_its_line_and_skip_bad_goes_on() {
    let dir = TempDir::new("trace-bad");
    let good = r#"{"v":1,"request_id":"a","arrival_us":0,"input_tokens":5,"output_tokens":1}"#;
    let bad = dir.write(
        "bad.jsonl",
        &format!(
            "{good}\n\n{}\n{good}\n",
            r#"{"v":1,"request_id":"b","arrival_us":-4}"#
        ),
    );
    let (bad, out_file) = (
        bad.display().to_string(),
        dir.path().join("out.csv").display().to_string(),
    );
    let convert = |skip: bool| {
        let mut list = args(&["trace", "convert", &bad, &out_file, "--to", "burstgpt"]);
        if skip {
            list.push("--skip-bad".into());
        }
        sluice(list)
    };
    let out = convert(false).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(&format!("{bad}:3: column 39: invalid value: integer `-4`")),
        "{stderr}"
    );
    // Nothing half written, under the name or beside it.
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");

    let out = convert(true).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        text(&out.stderr).starts_with("skipped 1 bad row; the first:\n"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&out_file).unwrap().lines().count(),
        3
    );

    let out = sluice(args(&["trace", "stats", &bad])).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        text(&out.stderr).starts_with(&format!("{bad}:3: ")),
        "{out:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quantised_timestamps_are_called_out() {
    let dir = TempDir::new("trace-quantised");
    // Mooncake-like 3 s buckets: 5 requests at each instant.
    let lines: String = (0..200)
        .map(|i| {
            format!(
                "{{\"timestamp\": {}, \"input_length\": 100, \"output_length\": 10, \"hash_ids\": [{i}]}}\n",
                i / 5 * 3000
            )
        })
        .collect();
    let file = dir.write("mooncake.jsonl", &lines).display().to_string();
    let out = sluice(args(&["trace", "stats", &file])).await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let shown = text(&out.stdout);
    assert!(
        shown.contains(
            "warning: 80.4% of inter-arrival times are exactly 0 (timestamps on a 3000 ms grid"
        ),
        "{shown}"
    );
    let out = sluice(args(&["trace", "stats", &file, "--json"])).await;
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            stats["quantised"].as_bool(),
            stats["max_same_instant"].as_u64()
        ),
        (Some(true), Some(5))
    );
}
