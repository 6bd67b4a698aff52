//! `sluice plan`: the rollout plan for a change, from the two versions (and,
//! with a config, the clusters' lineage and the config's `plans:` rules),
//! printed with the reason for each part, or as JSON.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use sluice_cli::ctl::{call, AdminToken};
use sluice_control::{ClusterConfig, Config};
use sluice_filters::{plan, Check, ModelLineage, Plan, PlanInput, PlanRules, Side, Spread};
use sluice_workload::{for_each_row, Format, TraceReader};

/// `sluice plan --from v1.4.2 --to v2.0.0`.
#[derive(clap::Args)]
pub(crate) struct PlanArgs {
    /// The version in service: a version, or a cluster's name or version in --config.
    #[arg(long)]
    from: String,
    /// The version to release, read like --from.
    #[arg(long)]
    to: String,
    /// The config whose clusters' lineage and `plans:` rules apply.
    #[arg(short, long)]
    config: Option<PathBuf>,
    /// The route the release is on; with --rps, its request rate.
    #[arg(long)]
    route: Option<String>,
    /// The route's request rate now (a route above `plans.high_traffic_rps`
    /// gets `p99_vs_stable`); unknown when absent.
    #[arg(long)]
    rps: Option<f64>,
    /// Recorded traffic (a trace with `version` and `input_tokens`): the
    /// prompt-length spread of each version, for a changed prompt template.
    #[arg(long)]
    traffic: Option<PathBuf>,
    /// The trace's format; found from its content when absent.
    #[arg(long, value_parser = Format::from_name, requires = "traffic")]
    traffic_format: Option<Format>,
    /// The plan as JSON: change, steps, hold, gates, checks, reasons.
    #[arg(long)]
    json: bool,
    /// Run the plan's checks (the capacity run, the throughput check) with
    /// --scenario, then post the rollout (`plan: auto`) to --admin. --from
    /// and --to must name clusters of --config.
    #[arg(long, requires_all = ["route", "config", "scenario"])]
    run: bool,
    /// --run: the scenario that loads the canary (its target reaches the
    /// canary, e.g. through `x-sluice-version: canary`).
    #[arg(long, requires = "run")]
    scenario: Option<PathBuf>,
    /// --run: the capacity run's SLAs, as `sluice capacity --sla`.
    #[arg(long, requires = "run")]
    sla: Option<String>,
    /// --run: the capacity run's time, as `sluice capacity --budget`.
    #[arg(long, default_value = "10m", requires = "run")]
    budget: String,
    /// --run: the rollout's name (default ROUTE-TO).
    #[arg(long, requires = "run")]
    name: Option<String>,
    /// --run: the control API the rollout is posted to.
    #[arg(
        long,
        env = "SLUICE_ADMIN_URL",
        default_value = "http://127.0.0.1:9901"
    )]
    admin: String,
    #[command(flatten)]
    token: AdminToken,
}

pub(crate) fn run(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let plan = match made(&args) {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(2));
        }
    };
    let text = if args.json {
        serde_json::to_string_pretty(&plan)?
    } else {
        render(&plan, args.route.as_deref())
    };
    crate::out(&text);
    if args.run {
        return run_checks_then_post(&args, &plan);
    }
    Ok(ExitCode::SUCCESS)
}

/// `--run`: each check in order, stopping at the first that fails (its
/// exit code); then the rollout, posted with `plan: auto` so that the
/// controller makes the same plan from its own config and names the rules
/// in its events. The controller itself never generates load.
fn run_checks_then_post(args: &PlanArgs, plan: &Plan) -> anyhow::Result<ExitCode> {
    let config = match &args.config {
        Some(path) => Config::from_yaml(&std::fs::read_to_string(path)?)
            .map_err(|e| anyhow::anyhow!("{}:\n{e}", path.display()))?,
        None => anyhow::bail!("--run needs --config"),
    };
    let cluster = |name: &str| {
        config
            .clusters
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.name.clone())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--run posts a rollout between two clusters: `{name}` is not a cluster of \
                     the config"
                )
            })
    };
    let (stable, canary) = (cluster(&args.from)?, cluster(&args.to)?);
    let (Some(route), Some(scenario)) = (&args.route, &args.scenario) else {
        anyhow::bail!("--run needs --route and --scenario");
    };
    let scenario = scenario.display().to_string();
    for check in &plan.checks {
        let code = match check {
            Check::CapacityRun => {
                let Some(sla) = &args.sla else {
                    anyhow::bail!("the plan has a capacity run: give its SLAs with --sla");
                };
                let argv = [
                    "capacity",
                    &scenario,
                    "--sla",
                    sla,
                    "--budget",
                    &args.budget,
                ];
                crate::capacity::run(Wrapped::<crate::capacity::CapacityArgs>::parse(argv)?)?
            }
            Check::Throughput => crate::load::run(Wrapped::<crate::load::LoadArgs>::parse([
                "load", &scenario,
            ])?)?,
            Check::InputLengthStage => {
                eprintln!(
                    "check input_length_stage: not run by --run (load the canary with the new \
                     template's prompts with `sluice load`)"
                );
                continue;
            }
        };
        if code != ExitCode::SUCCESS {
            eprintln!("check {} failed: the rollout is not posted", check.as_str());
            return Ok(code);
        }
        eprintln!("check {}: passed", check.as_str());
    }
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| format!("{route}-{}", plan.to));
    let body = serde_json::json!({
        "name": name, "route": route, "stable": stable, "canary": canary, "plan": "auto",
    });
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (status, text) = runtime.block_on(call(
        &args.admin,
        &args.token,
        "POST",
        "/v1/rollouts",
        Some(body.to_string()),
    ))?;
    if !status.is_success() {
        eprintln!("posting rollout {name}: {status}\n{text}");
        return Ok(ExitCode::from(1));
    }
    eprintln!("posted rollout {name} to {}", args.admin);
    Ok(ExitCode::SUCCESS)
}

/// Another verb's arguments, parsed from an argv as its own command line
/// would be (so that every default is that verb's).
#[derive(clap::Parser)]
struct Wrapped<A: clap::Args> {
    #[command(flatten)]
    args: A,
}

impl<A: clap::Args> Wrapped<A> {
    fn parse<const N: usize>(argv: [&str; N]) -> anyhow::Result<A> {
        use clap::Parser as _;
        Ok(Wrapped::<A>::try_parse_from(argv)?.args)
    }
}

fn made(args: &PlanArgs) -> Result<Plan, String> {
    let config = match &args.config {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            Some(Config::from_yaml(&text).map_err(|e| format!("{}:\n{e}", path.display()))?)
        }
        None => None,
    };
    let rules = config
        .as_ref()
        .map_or_else(PlanRules::default, |c| c.plans.clone());
    let from = side(config.as_ref(), &args.from);
    let to = side(config.as_ref(), &args.to);
    let none = ModelLineage::default();
    let spreads = match &args.traffic {
        Some(path) => Some(spreads(path, args.traffic_format, &from.0, &to.0)?),
        None => None,
    };
    plan(
        &PlanInput {
            from: Side {
                version: &from.0,
                lineage: from.1.map_or(&none, |c| &c.lineage),
            },
            to: Side {
                version: &to.0,
                lineage: to.1.map_or(&none, |c| &c.lineage),
            },
            route_rps: args.rps,
            prompt_spread: spreads,
        },
        &rules,
    )
}

/// What `name` stands for: a cluster of `config` by name or version (its
/// version and lineage), or the version itself.
fn side<'a>(config: Option<&'a Config>, name: &str) -> (String, Option<&'a ClusterConfig>) {
    let cluster = config.and_then(|c| {
        c.clusters
            .iter()
            .find(|x| x.name == name)
            .or_else(|| c.clusters.iter().find(|x| x.version == name))
    });
    match cluster {
        Some(c) => (c.version.clone(), Some(c)),
        None => (name.to_owned(), None),
    }
}

/// The prompt-length spread of each version's rows in the trace.
fn spreads(
    path: &std::path::Path,
    format: Option<Format>,
    from: &str,
    to: &str,
) -> Result<(Option<Spread>, Option<Spread>), String> {
    let mut reader = TraceReader::open(path, format).map_err(|e| e.to_string())?;
    let mut lengths: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for_each_row(&mut reader, false, |line| {
        if let (Some(v), Some(n)) = (&line.version, line.input_tokens) {
            lengths.entry(v.clone()).or_default().push(n);
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    let of = |v: &str| lengths.get(v).and_then(|l| Spread::of(l));
    Ok((of(from), of(to)))
}

/// The plan for people: each part with the rule that set it and why.
fn render(plan: &Plan, route: Option<&str>) -> String {
    let mut out = format!(
        "plan for {} → {}{}: a {} change\n\n",
        plan.from,
        plan.to,
        route.map_or_else(String::new, |r| format!(" on route {r}")),
        plan.change.as_str()
    );
    let steps: Vec<String> = plan.steps.iter().map(|s| format!("{s}%")).collect();
    out.push_str(&format!("  steps   {}\n", steps.join(" → ")));
    out.push_str(&format!(
        "  hold    {}\n",
        sluice_filters::format_duration(plan.hold)
    ));
    let gates: Vec<&str> = plan.gates.iter().map(|g| g.as_str()).collect();
    out.push_str(&format!("  gates   {}\n", gates.join(", ")));
    if let Some(rps) = plan.p99_vs_stable_above_rps {
        out.push_str(&format!(
            "          (p99_vs_stable judged only above {rps} req/s)\n"
        ));
    }
    let checks: Vec<&str> = plan.checks.iter().map(|c| c.as_str()).collect();
    out.push_str(&format!(
        "  checks  {}\n\nwhy\n",
        if checks.is_empty() {
            "none".to_owned()
        } else {
            checks.join(", ")
        }
    ));
    for r in &plan.reasons {
        out.push_str(&format!("  {:<28} {:<16} {}\n", r.part, r.rule, r.why));
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use sluice_filters::Change;

    const CONFIG: &str = "
listeners: [{ name: public, listen: 127.0.0.1:0, protocol: http }]
clusters:
  - { name: llm-stable, kind: llm, version: v1.4.2, endpoints: [127.0.0.1:9],
      lineage: { prompt_template: git://prompts@1 } }
  - { name: llm-canary, kind: llm, version: v1.4.3, endpoints: [127.0.0.1:9],
      lineage: { prompt_template: git://prompts@2 } }
plans:
  patch: { hold: 2m }
";

    fn args(dir: &std::path::Path, traffic: Option<PathBuf>) -> PlanArgs {
        let config = dir.join("sluice.yaml");
        std::fs::write(&config, CONFIG).unwrap();
        PlanArgs {
            from: "llm-stable".into(),
            to: "v1.4.3".into(),
            config: Some(config),
            route: Some("chat".into()),
            rps: Some(10.0),
            traffic,
            traffic_format: None,
            json: false,
            run: false,
            scenario: None,
            sla: None,
            budget: "10m".into(),
            name: None,
            admin: String::new(),
            token: AdminToken::default(),
        }
    }

    /// A sluice trace with `n` rows of each version, input tokens spread
    /// over `from` and `to` wide ranges.
    fn trace(dir: &std::path::Path, from_width: u64, to_width: u64) -> PathBuf {
        let mut text = String::new();
        for i in 0..100u64 {
            for (version, width) in [("v1.4.2", from_width), ("v1.4.3", to_width)] {
                text.push_str(&format!(
                    "{{\"v\":1,\"request_id\":\"{version}-{i}\",\"version\":\"{version}\",\
                     \"arrival_us\":{i},\"input_tokens\":{}}}\n",
                    100 + i * width / 100
                ));
            }
        }
        let path = dir.join("traffic.jsonl");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn temp() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "sluice-plan-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn clusters_are_found_by_name_or_version_with_the_configs_rules() {
        let dir = temp();
        let p = made(&args(&dir, None)).unwrap();
        assert_eq!((p.from.as_str(), p.to.as_str()), ("v1.4.2", "v1.4.3"));
        assert_eq!(p.change, Change::Patch);
        assert_eq!(p.hold, std::time::Duration::from_secs(120));
        // The template changed and no traffic says by how much: the stage.
        assert_eq!(p.checks, [Check::InputLengthStage]);
        let text = render(&p, Some("chat"));
        assert!(
            text.starts_with(
                "plan for v1.4.2 → v1.4.3 on route chat: a patch change\n\n  steps   20% → 100%\n  \
                 hold    2m\n"
            ),
            "{text}"
        );
        assert!(text.contains("checks.input_length_stage"), "{text}");
    }

    #[test]
    fn recorded_traffic_decides_the_input_length_stage() {
        let dir = temp();
        // Spreads alike: no stage.
        let p = made(&args(&dir, Some(trace(&dir, 400, 420)))).unwrap();
        assert!(p.checks.is_empty(), "{p:?}");
        // The new version's prompts spread twice as wide: the stage.
        let p = made(&args(&dir, Some(trace(&dir, 400, 800)))).unwrap();
        assert_eq!(p.checks, [Check::InputLengthStage]);
        let why = &p.reasons.last().unwrap().why;
        assert!(why.contains("moved +100%"), "{why}");
    }

    /// `--run` hands each check to its own verb as that verb's command line
    /// would: every default is the verb's, and a missing part is its error.
    #[test]
    fn the_checks_parse_as_their_own_commands_would() {
        let capacity = [
            "capacity",
            "s.yaml",
            "--sla",
            "ttft_p95=800ms",
            "--budget",
            "2m",
        ];
        assert!(Wrapped::<crate::capacity::CapacityArgs>::parse(capacity).is_ok());
        assert!(Wrapped::<crate::load::LoadArgs>::parse(["load", "s.yaml"]).is_ok());
        let no_sla = Wrapped::<crate::capacity::CapacityArgs>::parse(["capacity", "s.yaml"]);
        let error = no_sla.err().unwrap().to_string();
        assert!(error.contains("--sla"), "{error}");
        let bad = Wrapped::<crate::capacity::CapacityArgs>::parse([
            "capacity", "s.yaml", "--sla", "x", "--budget", "soon",
        ]);
        let error = bad.err().unwrap().to_string();
        assert!(error.contains("--budget"), "{error}");
    }

    #[test]
    fn bad_input_names_where() {
        let dir = temp();
        let mut a = args(&dir, None);
        a.to = "latest".into();
        assert_eq!(
            made(&a).unwrap_err(),
            "to version: `latest` is not a semantic version (MAJOR[.MINOR[.PATCH]], a \
             leading `v` allowed, e.g. v1.4.2)"
        );
        let mut a = args(&dir, None);
        let bad = dir.join("bad.yaml");
        std::fs::write(&bad, CONFIG.replace("git://prompts@2", "git://prompts")).unwrap();
        a.config = Some(bad.clone());
        assert_eq!(
            made(&a).unwrap_err(),
            format!(
                "{}:\nclusters[1].lineage.prompt_template: `git://prompts` has no `@`: write \
                 uri@version",
                bad.display()
            )
        );
    }
}
