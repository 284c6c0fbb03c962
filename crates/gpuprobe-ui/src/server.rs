//! One request, from the socket to the answer: the gate ([`crate::gate`]), the route, and
//! the reply with the headers every answer carries (the content security policy among
//! them). Routes are plain functions from what was asked to a [`Reply`], so tests can call
//! them without a socket.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use gpuprobe_model::ProbeResult;
use gpuprobe_report::{HtmlLinks, issue_texts, render_html_linked};
use gpuprobe_runner::{Run, RunFiles};
use serde::Serialize;
use serde_json::json;

use crate::gate::{self, Decision, Token};
use crate::jobs::{CheckRequest, Jobs};
use crate::pages::{self, Pages};
use crate::run_index::{self, Filter};
use crate::{UiOptions, compare};

/// What every page may load: its own files only. Images may be `data:` (the page's icon);
/// no plugin, no base URL, no framing by another page, forms post only here.
pub(crate) const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The most a form body may hold.
const MAX_FORM_BYTES: u64 = 64 * 1024;
/// How often a watched run's results are read again.
const POLL: Duration = Duration::from_millis(250);
/// How often a run this server did not start is looked at again.
const POLL_OTHER: Duration = Duration::from_secs(2);
/// How long one event stream stays open at most (the browser opens a new one after).
const STREAM_LIMIT: Duration = Duration::from_secs(3600);
/// The most recent results a live page lists.
const LIVE_RESULTS: usize = 40;

/// What the server knows: what it was asked, where it listens, its token, its checks.
pub(crate) struct State {
    options: UiOptions,
    bound: SocketAddr,
    token: Token,
    jobs: Jobs,
    pages: Pages,
}

impl State {
    pub(crate) fn new(options: UiOptions, bound: SocketAddr, token: Token) -> State {
        State {
            options,
            bound,
            token,
            jobs: Jobs::default(),
            pages: Pages::new(),
        }
    }

    pub(crate) fn jobs(&self) -> &Jobs {
        &self.jobs
    }

    fn root(&self) -> &Path {
        &self.options.runs_root
    }
}

/// An answer.
#[derive(Debug)]
pub(crate) enum Reply {
    /// An HTML page.
    Page(u16, String),
    /// 303 to a URL of this server.
    Redirect(String),
    /// A static file.
    Asset(&'static str, &'static str),
    /// The event stream of a run.
    Events(String),
    /// Nothing (the icon a browser asks for by itself).
    NoContent,
    /// Plain text (a profile's export).
    Text(String),
}

/// Answers one request.
pub(crate) fn answer(state: &State, mut request: tiny_http::Request) {
    let target = request.url().to_string();
    let (path, query) = gate::split_target(&target);
    let header = |name: &str| {
        request
            .headers()
            .iter()
            .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
            .map(|h| h.value.as_str().to_string())
    };
    let (host, origin, cookie) = (header("Host"), header("Origin"), header("Cookie"));
    let post = *request.method() == tiny_http::Method::Post;
    let get = matches!(
        *request.method(),
        tiny_http::Method::Get | tiny_http::Method::Head
    );
    let mut form = Vec::new();
    if post {
        let mut body = String::new();
        let _ = request
            .as_reader()
            .take(MAX_FORM_BYTES)
            .read_to_string(&mut body);
        form = gate::parse_pairs(&body);
    }
    let reply = if path == "/favicon.ico" {
        Reply::NoContent
    } else if !post && !get {
        message(state, 405, "Not allowed", "only GET and POST are answered")
    } else {
        let credentials = gate::Credentials {
            post,
            path,
            query: &query,
            host: host.as_deref(),
            origin: origin.as_deref(),
            cookie: cookie.as_deref(),
            form: &form,
        };
        match gate::decide(&credentials, &state.token, state.bound) {
            Decision::Refuse(why) => {
                let _ = request.respond(plain(403, &format!("refused: {why}\n")));
                return;
            }
            Decision::SetCookieAndGo(location) => {
                let response = with_headers(
                    tiny_http::Response::from_string("").with_status_code(303),
                    &[
                        ("Location", &location),
                        (
                            "Set-Cookie",
                            &gate::set_cookie(&state.token, state.bound.port()),
                        ),
                    ],
                );
                let _ = request.respond(response);
                return;
            }
            Decision::Pass => route(state, post, path, &query, &form),
        }
    };
    match reply {
        Reply::Events(name) => stream_events(state, request, &name),
        reply => {
            let _ = request.respond(response_of(reply));
        }
    }
}

/// The route a (method, path) names.
pub(crate) fn route(
    state: &State,
    post: bool,
    path: &str,
    query: &[(String, String)],
    form: &[(String, String)],
) -> Reply {
    if let Some((content_type, body)) = pages::asset(path).filter(|_| !post) {
        return Reply::Asset(content_type, body);
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (post, parts.as_slice()) {
        (false, [""]) => runs_page(state, query),
        (false, ["runs", name]) => run_page(state, name),
        (false, ["runs", name, "events"]) => match run_index::run_path(state.root(), name) {
            Some(_) => Reply::Events((*name).to_string()),
            None => not_found(state),
        },
        (true, ["runs", name, "stop"]) => {
            if run_index::run_path(state.root(), name).is_none() {
                return not_found(state);
            }
            state.jobs.stop(name);
            Reply::Redirect(format!("/runs/{name}"))
        }
        (false, ["compare"]) => compare_page(state, query),
        (false, ["check"]) => check_page(state, &CheckForm::default(), None),
        (false, ["profiles"]) => profiles_page(state),
        (false, ["profiles", name]) => profile_page(state, name),
        (false, ["profiles", name, "export"]) => export_profile(state, name, query),
        (true, ["profiles", name, "delete"]) => delete_profile(state, name, form),
        (false, ["kb"]) => kb_page(state, query),
        (true, ["check"]) => start_check(state, form),
        (false, ["fix"]) => fix_page(state, first(query, "from"), None),
        (true, ["fix"]) => start_fix(state, form),
        _ => not_found(state),
    }
}

fn not_found(state: &State) -> Reply {
    message(
        state,
        404,
        "Not found",
        "no such page or run (a run is named as `gpuprobe runs list` names it)",
    )
}

fn message(state: &State, status: u16, title: &str, text: &str) -> Reply {
    Reply::Page(
        status,
        state
            .pages
            .render("message.html", json!({"title": title, "message": text})),
    )
}

fn runs_page(state: &State, query: &[(String, String)]) -> Reply {
    let filter = Filter::from_query(query);
    let number = first(query, "page").trim().parse::<usize>().unwrap_or(1);
    let (page, error) = match run_index::page(state.root(), &filter, number) {
        Ok(page) => (Some(page), None),
        Err(e) => (None, Some(e)),
    };
    let rows = page.as_ref().map(|p| p.rows.clone()).unwrap_or_default();
    Reply::Page(
        200,
        state.pages.render(
            "runs.html",
            json!({"rows": rows, "page": page, "total": page.as_ref().map_or(0, |p| p.total),
                "root": state.root().display().to_string(), "filter": filter, "error": error}),
        ),
    )
}

fn run_page(state: &State, name: &str) -> Reply {
    let Some(path) = run_index::run_path(state.root(), name) else {
        return not_found(state);
    };
    let job = state.jobs.view(name);
    let running = job.as_ref().is_some_and(|j| j.running);
    let files = RunFiles::at(&path);
    let check = match Run::open(&path) {
        Ok(run) => run.check().clone(),
        // A run this server just started has not written its plan yet; a `fix --from`
        // keeps no check of its own.
        Err(_) if job.is_some() || files.has_fix_account() => files.clone(),
        Err(_) => {
            return message(
                state,
                200,
                name,
                "this directory holds no run: neither a plan nor a report",
            );
        }
    };
    // A finished fix is shown from its account (and the check it started from), a finished
    // check from its report.
    let finished = if files.has_fix_account() {
        Some(path.clone())
    } else if check.has_report() {
        Some(check.path().to_path_buf())
    } else {
        None
    };
    if let Some(finished) = finished.filter(|_| !running) {
        return match gpuprobe_runner::read_finished(&finished) {
            Ok(finished) => {
                let fix = finished.fix.as_ref();
                let issues = issue_texts(&finished.report, fix);
                let linked = HtmlLinks {
                    stylesheet: "/static/report.css".into(),
                    home: "/".into(),
                };
                match render_html_linked(&finished.report, fix, &issues, linked) {
                    Ok(page) => Reply::Page(200, page),
                    Err(e) => message(state, 500, name, &format!("{e}")),
                }
            }
            Err(e) => message(
                state,
                200,
                name,
                &format!(
                    "this run is corrupt: {}",
                    e.to_string()
                        .replace(&format!("{}/", state.root().display()), "")
                ),
            ),
        };
    }
    let progress = progress(state, name, &check);
    Reply::Page(
        200,
        state.pages.render(
            "live.html",
            json!({"name": name, "state": progress.state, "simulated": progress.simulated,
                "done": progress.done,
                "total": progress.total, "results": progress.results, "job": job,
                "live": progress.live, "token": state.token.as_str(),
                "path": path.display().to_string()}),
        ),
    )
}

/// Where a run stands, as its live page and its events say it.
#[derive(Debug, Serialize)]
struct Progress {
    state: String,
    simulated: bool,
    done: usize,
    total: usize,
    running: bool,
    live: bool,
    results: Vec<serde_json::Value>,
    log: Vec<String>,
}

/// Only the count of planned tasks, and whether the run is under fault simulation, are read
/// of the plan.
#[derive(serde::Deserialize)]
struct PlanCount {
    #[serde(default)]
    tasks: Vec<serde::de::IgnoredAny>,
    #[serde(default)]
    simulate: Option<serde::de::IgnoredAny>,
}

fn progress(state: &State, name: &str, check: &RunFiles) -> Progress {
    let results: Vec<ProbeResult> = check.recorded_results().unwrap_or_default();
    let plan = check.read_plan::<PlanCount>().ok();
    let total = plan.as_ref().map_or(0, |p| p.tasks.len());
    let job = state.jobs.view(name);
    let running = job.as_ref().is_some_and(|j| j.running);
    // Every page made under fault simulation says so: from its start (the job's arguments),
    // its plan or its results.
    let simulated = plan.as_ref().is_some_and(|p| p.simulate.is_some())
        || results.iter().any(|r| r.simulated)
        || job.as_ref().is_some_and(|j| j.simulated);
    // A run this server did not start is watched through what `runs list` says of it.
    let info = job
        .is_none()
        .then(|| run_index::run_path(state.root(), name))
        .flatten()
        .and_then(|path| gpuprobe_runner::inspect_run(&path, name, std::time::SystemTime::now()));
    let live = running
        || info
            .as_ref()
            .is_some_and(|r| r.state == gpuprobe_runner::RunState::InProgress);
    let state_text = match &job {
        Some(j) if j.running && j.stopping => "stopping".to_string(),
        Some(j) if j.running => "running".to_string(),
        Some(j) => ended_text(
            j,
            check.has_report() || run_files(state, name).has_fix_account(),
        ),
        None => info.map_or("unknown".into(), |r| r.state.label().to_string()),
    };
    let shown: Vec<serde_json::Value> = results
        .iter()
        .rev()
        .take(LIVE_RESULTS)
        .map(|r| {
            let class = match r.verdict.label() {
                "PASS" => "ok",
                "SKIP" | "NOT-TESTED" => "skip",
                _ => "bad",
            };
            json!({"probe": r.probe.to_string(), "device": r.device.to_string(),
                "verdict": r.verdict.label(), "class": class})
        })
        .collect();
    Progress {
        state: state_text,
        simulated,
        done: results.len(),
        total: total.max(results.len()),
        running,
        live,
        results: shown,
        log: job
            .map(|j| j.log.into_iter().rev().take(30).rev().collect())
            .unwrap_or_default(),
    }
}

/// How a child this server started ended: with its report, or without one (killed, crashed)
/// and how: its exit code or the signal that ended it.
fn ended_text(job: &crate::jobs::JobView, finished: bool) -> String {
    let how = match (job.exit_code, job.signal) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => match nix::sys::signal::Signal::try_from(signal) {
            Ok(name) => format!("signal {signal}, {}", name.as_str()),
            Err(_) => format!("signal {signal}"),
        },
        (None, None) => "exit status unknown".to_string(),
    };
    if finished {
        format!("ended, {how}")
    } else {
        format!("ended without a report ({how})")
    }
}

/// The files of the run `name` (nothing is read yet).
fn run_files(state: &State, name: &str) -> RunFiles {
    RunFiles::at(&state.root().join(name))
}

/// The event stream of a run: `progress` whenever what it holds changed, then `done` with
/// the page to open once it is over (its report written, or its check ended).
fn stream_events(state: &State, request: tiny_http::Request, name: &str) {
    let Some(path) = run_index::run_path(state.root(), name) else {
        return;
    };
    let check = match Run::open(&path) {
        Ok(run) => run.check().clone(),
        Err(_) => RunFiles::at(&path),
    };
    let mut out = request.into_writer();
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\nContent-Security-Policy: {CONTENT_SECURITY_POLICY}\r\n\r\n"
    );
    if out
        .write_all(head.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        return;
    }
    let started = Instant::now();
    let mut last = String::new();
    while started.elapsed() < STREAM_LIMIT {
        let progress = progress(state, name, &check);
        let data = serde_json::to_string(&progress).unwrap_or_default();
        let over = !progress.running && (check.has_report() || !progress.live);
        let mut event = String::new();
        if data != last {
            event.push_str(&format!("event: progress\ndata: {data}\n\n"));
            last = data;
        } else {
            // A comment keeps the connection alive and finds a closed one.
            event.push_str(": waiting\n\n");
        }
        if over {
            let href = json!({"href": format!("/runs/{name}")});
            event.push_str(&format!("event: done\ndata: {href}\n\n"));
        }
        if out
            .write_all(event.as_bytes())
            .and_then(|_| out.flush())
            .is_err()
            || over
        {
            return;
        }
        // A run of this server's is read often; another's is judged as `runs list` judges
        // it (its writer lock, else its files' last change), so less often.
        std::thread::sleep(if progress.running { POLL } else { POLL_OTHER });
    }
}

/// The form's values as the page shows them again.
#[derive(Debug, Clone, Serialize)]
struct CheckForm {
    tier: String,
    device: String,
    only: String,
    simulate: String,
}

impl Default for CheckForm {
    fn default() -> Self {
        CheckForm {
            tier: "quick".into(),
            device: "all".into(),
            only: String::new(),
            simulate: String::new(),
        }
    }
}

fn check_page(state: &State, form: &CheckForm, error: Option<String>) -> Reply {
    let presets: Vec<serde_json::Value> = gpuprobe_runner::simulation_presets()
        .into_iter()
        .map(|p| json!({"name": p.name, "description": p.description}))
        .collect();
    Reply::Page(
        if error.is_some() { 400 } else { 200 },
        state.pages.render(
            "check.html",
            json!({"root": state.root().display().to_string(), "token": state.token.as_str(),
                "form": form, "error": error, "presets": presets}),
        ),
    )
}

fn start_check(state: &State, form: &[(String, String)]) -> Reply {
    let get = |name: &str| {
        form.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let shown = CheckForm {
        tier: get("tier"),
        device: get("device"),
        only: get("only"),
        simulate: get("simulate"),
    };
    let request = match CheckRequest::parse(form) {
        Ok(request) => request,
        Err(e) => return check_page(state, &shown, Some(e)),
    };
    match state.jobs.start(
        &state.options.exe,
        state.root(),
        state.options.python.as_deref(),
        &request,
    ) {
        Ok(name) => Reply::Redirect(format!("/runs/{name}")),
        Err(e) => check_page(state, &shown, Some(e)),
    }
}

/// A finished check a fix may start from: its directory.
fn fix_source(state: &State, name: &str) -> Result<std::path::PathBuf, String> {
    let path = run_index::run_path(state.root(), name)
        .ok_or_else(|| format!("no run {name:?} in the runs directory"))?;
    match Run::open(&path) {
        Ok(Run::Check(check)) if check.has_report() => Ok(path),
        _ => Err(format!(
            "{name} is no finished check: a fix starts from a check's report"
        )),
    }
}

fn fix_page(state: &State, from: &str, error: Option<String>) -> Reply {
    let error = error.or_else(|| fix_source(state, from).err());
    Reply::Page(
        if error.is_some() { 400 } else { 200 },
        state.pages.render(
            "fix.html",
            json!({"from": from, "token": state.token.as_str(), "error": error,
                "max_runs": 40, "limit": crate::jobs::MAX_FIX_RUNS}),
        ),
    )
}

fn start_fix(state: &State, form: &[(String, String)]) -> Reply {
    let from = first(form, "from");
    let source = match fix_source(state, from) {
        Ok(source) => source,
        Err(e) => return fix_page(state, from, Some(e)),
    };
    let Ok(max_runs) = first(form, "max_runs").trim().parse::<u32>() else {
        return fix_page(
            state,
            from,
            Some("the most trial runs is a whole number".into()),
        );
    };
    match state.jobs.start_fix(
        &state.options.exe,
        state.root(),
        state.options.python.as_deref(),
        &source,
        max_runs,
    ) {
        Ok(name) => Reply::Redirect(format!("/runs/{name}")),
        Err(e) => fix_page(state, from, Some(e)),
    }
}

fn compare_page(state: &State, query: &[(String, String)]) -> Reply {
    let get = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let names = run_index::run_names(state.root());
    let (a, b) = (get("a"), get("b"));
    let mut context = json!({"names": names, "a": a, "b": b});
    if !a.is_empty() || !b.is_empty() {
        match (load(state, &a), load(state, &b)) {
            (Ok(before), Ok(after)) => {
                context["c"] = json!(compare::compare(&before, &after));
            }
            (Err(e), _) | (_, Err(e)) => context["error"] = json!(e),
        }
    }
    Reply::Page(200, state.pages.render("compare.html", context))
}

/// A finished run's report, or why it cannot be compared.
fn load(state: &State, name: &str) -> Result<gpuprobe_model::Report, String> {
    if name.is_empty() {
        return Err("choose two runs, A and B".into());
    }
    let path = run_index::run_path(state.root(), name)
        .ok_or_else(|| format!("no run {name} in the runs directory"))?;
    match run_index::read_report(&path) {
        Some(Ok(report)) => Ok(report),
        Some(Err(e)) => Err(format!("{name} is corrupt: {e}")),
        None => Err(format!("{name} has no report yet (not finished)")),
    }
}

fn first<'a>(pairs: &'a [(String, String)], name: &str) -> &'a str {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map_or("", |(_, v)| v.as_str())
}

fn profiles_page(state: &State) -> Reply {
    let profiles = crate::profiles::list(state.root());
    Reply::Page(
        200,
        state.pages.render(
            "profiles.html",
            json!({"profiles": profiles, "root": state.root().display().to_string()}),
        ),
    )
}

/// The run holding a profile, by its name in the URL.
fn profile_run(state: &State, name: &str) -> Option<std::path::PathBuf> {
    run_index::run_path(state.root(), name).filter(|path| RunFiles::at(path).holds_profile())
}

fn profile_page(state: &State, name: &str) -> Reply {
    let Some(view) = profile_run(state, name).and_then(|path| {
        let mut view = crate::profiles::view(state.root(), name, &path)?;
        view.used_by = Some(crate::profiles::used_by(state.root(), name, &path));
        Some(view)
    }) else {
        return not_found(state);
    };
    Reply::Page(
        200,
        state.pages.render(
            "profile.html",
            json!({"p": view, "token": state.token.as_str()}),
        ),
    )
}

fn export_profile(state: &State, name: &str, query: &[(String, String)]) -> Reply {
    let (Some(path), Some(format)) = (
        profile_run(state, name),
        crate::profiles::export_format(first(query, "format")),
    ) else {
        return not_found(state);
    };
    match crate::profiles::export(&path, format) {
        Some(Ok(text)) => Reply::Text(text),
        Some(Err(why)) => message(
            state,
            200,
            name,
            &format!("this profile cannot be used: {why}"),
        ),
        None => not_found(state),
    }
}

fn delete_profile(state: &State, name: &str, form: &[(String, String)]) -> Reply {
    let Some(path) = profile_run(state, name) else {
        return not_found(state);
    };
    if first(form, "confirm") != "yes" {
        return message(
            state,
            400,
            "Not deleted",
            "tick the box that confirms the deletion, then delete again",
        );
    }
    match crate::profiles::delete(&path) {
        Ok(()) => Reply::Redirect("/profiles".into()),
        Err(why) => message(state, 500, "Not deleted", &why),
    }
}

fn kb_page(state: &State, query: &[(String, String)]) -> Reply {
    let kb = gpuprobe_kb::KnowledgeBase::embedded();
    let q = first(query, "q");
    let entries = crate::kb::search(&kb, q);
    let run = first(query, "run").trim();
    let mut error = None;
    let (against, matches) = if first(query, "live") == "1" {
        let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
        let fingerprint =
            gpuprobe_doctor::live_fingerprint(state.options.python.as_deref(), true, &env);
        (
            "this machine now".to_string(),
            crate::kb::matches(&kb, &fingerprint, &[]),
        )
    } else if !run.is_empty() {
        // A run's recorded stack and results, as `gpuprobe kb match --report` matches them.
        let report = match run_index::run_path(state.root(), run) {
            None => Err(format!("no run {run:?} in the runs directory")),
            Some(path) => match run_index::read_report(&path) {
                Some(Ok(report)) => Ok(report),
                Some(Err(why)) => Err(format!("{run} is corrupt: {why}")),
                None => Err(format!("{run} has no report yet (not finished)")),
            },
        };
        match report {
            Ok(report) => (
                format!("the run {run}"),
                crate::kb::matches(&kb, &report.fingerprint, &report.results),
            ),
            Err(why) => {
                error = Some(why);
                (String::new(), Vec::new())
            }
        }
    } else {
        match crate::kb::newest_report(state.root()) {
            Some((name, fingerprint, results)) => (
                format!("the newest finished check, {name}"),
                crate::kb::matches(&kb, &fingerprint, &results),
            ),
            None => (String::new(), Vec::new()),
        }
    };
    Reply::Page(
        200,
        state.pages.render(
            "kb.html",
            json!({"q": q, "entries": entries, "matches": matches, "against": against,
                "run": run, "error": error}),
        ),
    )
}

fn plain(status: u16, text: &str) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    with_headers(
        tiny_http::Response::from_string(text).with_status_code(status),
        &[("Content-Type", "text/plain; charset=utf-8")],
    )
}

fn response_of(reply: Reply) -> tiny_http::Response<std::io::Cursor<Vec<u8>>> {
    match reply {
        Reply::Page(status, html) => with_headers(
            tiny_http::Response::from_string(html).with_status_code(status),
            &[("Content-Type", "text/html; charset=utf-8")],
        ),
        Reply::Redirect(location) => with_headers(
            tiny_http::Response::from_string("").with_status_code(303),
            &[("Location", &location)],
        ),
        Reply::Asset(content_type, body) => with_headers(
            tiny_http::Response::from_string(body),
            &[("Content-Type", content_type)],
        ),
        Reply::Text(text) => with_headers(
            tiny_http::Response::from_string(text),
            &[("Content-Type", "text/plain; charset=utf-8")],
        ),
        Reply::NoContent | Reply::Events(_) => with_headers(
            tiny_http::Response::from_string("").with_status_code(204),
            &[],
        ),
    }
}

/// Adds `extra` and the headers every answer carries.
fn with_headers<R: Read>(
    mut response: tiny_http::Response<R>,
    extra: &[(&str, &str)],
) -> tiny_http::Response<R> {
    let common = [
        ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
        ("X-Content-Type-Options", "nosniff"),
        ("X-Frame-Options", "DENY"),
        // Not `no-referrer`: under it a browser sends `Origin: null` with a form post, which
        // the gate refuses as a foreign origin.
        ("Referrer-Policy", "same-origin"),
        ("Cache-Control", "no-store"),
    ];
    for (name, value) in common.iter().chain(extra) {
        if let Ok(header) = tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            response.add_header(header);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state(root: &Path) -> State {
        State::new(
            UiOptions {
                bind: "127.0.0.1".parse().unwrap(),
                port: 0,
                runs_root: root.to_path_buf(),
                exe: "/bin/false".into(),
                python: None,
            },
            "127.0.0.1:9".parse().unwrap(),
            Token::from_text("t"),
        )
    }

    fn status(reply: &Reply) -> u16 {
        match reply {
            Reply::Page(status, _) => *status,
            Reply::Redirect(_) => 303,
            _ => 200,
        }
    }

    #[test]
    fn routes_answer_what_they_name_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let s = state(root.path());
        let get = |path: &str| route(&s, false, path, &[], &[]);
        assert_eq!(status(&get("/")), 200);
        assert_eq!(status(&get("/compare")), 200);
        assert_eq!(status(&get("/check")), 200);
        assert!(matches!(get("/static/ui.js"), Reply::Asset(..)));
        for missing in [
            "/nothing",
            "/runs/../../etc/passwd",
            "/runs/check-2026-11-22T10-04-05-1",
            "/runs/check-2026-11-22T10-04-05-1/events",
            "/static/../../Cargo.toml",
            "/runs",
        ] {
            assert_eq!(status(&get(missing)), 404, "{missing}");
        }
        // Actions take POST only.
        assert_eq!(status(&get("/runs/check-2026-11-22T10-04-05-1/stop")), 404);
        // A fix starts only from a finished check of the runs directory.
        for from in ["", "..", "check-2026-11-22T10-04-05-1"] {
            let q = vec![("from".to_string(), from.to_string())];
            assert_eq!(status(&route(&s, false, "/fix", &q, &[])), 400, "{from}");
            let form = vec![
                ("from".to_string(), from.to_string()),
                ("max_runs".to_string(), "3".to_string()),
            ];
            assert_eq!(status(&route(&s, true, "/fix", &[], &form)), 400, "{from}");
        }
        let bad = vec![("tier".to_string(), "huge".to_string())];
        let reply = route(&s, true, "/check", &[], &bad);
        assert_eq!(status(&reply), 400);
        let Reply::Page(_, html) = reply else {
            panic!()
        };
        assert!(html.contains("no tier"), "{html}");
    }

    #[test]
    fn a_corrupt_run_shows_as_such_and_the_list_still_renders() {
        let root = tempfile::tempdir().unwrap();
        let name = "check-2026-11-22T10-04-05-1";
        let run = root.path().join(name);
        std::fs::create_dir_all(run.join("workers")).unwrap();
        std::fs::write(run.join(gpuprobe_runner::REPORT_FILE), "[1,").unwrap();
        let s = state(root.path());
        let Reply::Page(200, list) = route(&s, false, "/", &[], &[]) else {
            panic!()
        };
        assert!(list.contains(name) && list.contains("corrupt"), "{list}");
        let Reply::Page(200, page) = route(&s, false, &format!("/runs/{name}"), &[], &[]) else {
            panic!()
        };
        assert!(page.contains("this run is corrupt"), "{page}");
        assert!(!page.contains(&root.path().display().to_string()), "{page}");
        let q = vec![
            ("a".to_string(), name.to_string()),
            ("b".to_string(), name.to_string()),
        ];
        let Reply::Page(200, page) = route(&s, false, "/compare", &q, &[]) else {
            panic!()
        };
        assert!(page.contains("is corrupt"), "{page}");
    }

    /// A profile as `fix` writes it, its free text hostile.
    const PROFILE: &str = "profile_version = 1\ncreated_by = \"gpuprobe <script>\"\n\
        created_at = \"2026-11-22T10:00:00Z\"\nsimulated = true\n\
        cures = [\"copy.h2d.pageable.tiny.nonblocking\"]\nmeasured_cost = \"<b>none</b>\"\n\n\
        [env]\nHSA_ENABLE_SDMA = \"0\"\n\n[proven_on]\ngpus = [\"gfx1151\"]\n\
        kernel = \"0.0.0-nowhere\"\ntorch = \"0.0.0\"\n";

    #[test]
    fn a_profile_is_shown_exported_and_deleted_only_when_confirmed() {
        let root = tempfile::tempdir().unwrap();
        let name = "fix-2026-11-22T10-04-05-1";
        let run = root.path().join(name);
        std::fs::create_dir_all(run.join("workers")).unwrap();
        std::fs::write(
            RunFiles::at(&run).file(gpuprobe_runner::PROFILE_FILE),
            PROFILE,
        )
        .unwrap();
        // A check whose workers ran with the profile's settings, one that did not, and two
        // `run --profile` uses of it (one of an earlier version).
        for (check, settings) in [
            (
                "check-2026-11-22T11-00-00-1",
                json!({"set": {"HSA_ENABLE_SDMA": "0"}}),
            ),
            ("check-2026-11-22T12-00-00-1", json!({})),
        ] {
            let dir = root.path().join(check);
            std::fs::create_dir_all(dir.join("workers")).unwrap();
            std::fs::write(
                RunFiles::at(&dir).file(gpuprobe_runner::PLAN_FILE),
                json!({"tasks": [], "settings": settings}).to_string(),
            )
            .unwrap();
        }
        let profile_path =
            std::fs::canonicalize(RunFiles::at(&run).file(gpuprobe_runner::PROFILE_FILE)).unwrap();
        for (digest, program) in [
            ("fnv1a64:0".to_string(), "torchrun"),
            (
                gpuprobe_runner::profile_digest(PROFILE.as_bytes()),
                "<python>",
            ),
        ] {
            gpuprobe_runner::append_profile_use(
                root.path(),
                &gpuprobe_runner::ProfileUse {
                    at: "2026-11-22T13:00:00Z".into(),
                    profile: profile_path.display().to_string(),
                    digest,
                    program: program.into(),
                    exit_code: 3,
                },
            )
            .unwrap();
        }
        let s = state(root.path());
        let page = |path: &str| match route(&s, false, path, &[], &[]) {
            Reply::Page(status, html) => (status, html),
            Reply::Text(text) => (200, text),
            other => panic!("{other:?}"),
        };
        let (status, list) = page("/profiles");
        assert_eq!(status, 200);
        assert!(list.contains(name) && list.contains("SIMULATED"), "{list}");
        let (_, one) = page(&format!("/profiles/{name}"));
        assert!(one.contains("copy.h2d.pageable.tiny.nonblocking"), "{one}");
        assert!(one.contains("HSA_ENABLE_SDMA=0"), "{one}");
        // Used by: the check that ran under it (linked), not the other; both uses, newest
        // first, the program's name escaped.
        assert!(
            one.contains("<a href=\"/runs/check-2026-11-22T11-00-00-1\">"),
            "{one}"
        );
        assert!(!one.contains("check-2026-11-22T12-00-00-1"), "{one}");
        assert!(one.contains("2 uses recorded"), "{one}");
        assert!(
            one.contains("&lt;python&gt;") && !one.contains("<python>"),
            "{one}"
        );
        let newest = one.find("this version").unwrap();
        assert!(newest < one.find("an earlier version").unwrap(), "{one}");
        assert!(
            one.contains("&lt;b&gt;none") && !one.contains("<b>none"),
            "{one}"
        );
        let q = vec![("format".to_string(), "env".to_string())];
        let Reply::Text(env) = route(&s, false, &format!("/profiles/{name}/export"), &q, &[])
        else {
            panic!()
        };
        assert!(env.contains("HSA_ENABLE_SDMA=0"), "{env}");
        let bad = vec![("format".to_string(), "exe".to_string())];
        let reply = route(&s, false, &format!("/profiles/{name}/export"), &bad, &[]);
        assert_eq!(status_of(&reply), 404);
        // Delete: refused without the confirmation, done with it.
        let delete = format!("/profiles/{name}/delete");
        assert_eq!(status_of(&route(&s, true, &delete, &[], &[])), 400);
        assert!(RunFiles::at(&run).holds_profile());
        let yes = vec![("confirm".to_string(), "yes".to_string())];
        assert_eq!(status_of(&route(&s, true, &delete, &[], &yes)), 303);
        assert!(!RunFiles::at(&run).holds_profile());
        assert!(run.is_dir(), "the run stays");
        assert_eq!(
            status_of(&route(&s, false, &format!("/profiles/{name}"), &[], &[])),
            404
        );
    }

    #[test]
    fn a_started_run_that_dies_says_how_and_is_no_longer_in_progress() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        // A "check" that writes its plan under its writer lock, then is killed outright.
        let exe = root.path().join("dies");
        std::fs::write(
            &exe,
            "#!/bin/sh\nfor a; do case $a in --run-dir=*) d=${a#--run-dir=};; esac; done\n\
             mkdir -p $d/workers && echo '{\"tasks\": [1, 2]}' > $d/plan.json\n\
             exec flock -o $d/writer.lock sh -c 'kill -9 $PPID; sleep 1'\n",
        )
        .unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut s = state(root.path());
        s.options.exe = exe;
        let form = vec![("tier".to_string(), "quick".to_string())];
        let Reply::Redirect(to) = route(&s, true, "/check", &[], &form) else {
            panic!("not started")
        };
        let name = to.trim_start_matches("/runs/").to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.jobs.view(&name).is_some_and(|j| j.running) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let Reply::Page(200, page) = route(&s, false, &to, &[], &[]) else {
            panic!()
        };
        assert!(
            page.contains("ended without a report (signal 9, SIGKILL)"),
            "{page}"
        );
        let Reply::Page(200, list) = route(&s, false, "/", &[], &[]) else {
            panic!()
        };
        assert!(list.contains(&name), "{list}");
        assert!(list.contains("1–1 of 1 run(s) in"), "{list}");
        let q = vec![("verdict".to_string(), "pass".to_string())];
        let Reply::Page(200, none) = route(&s, false, "/", &q, &[]) else {
            panic!()
        };
        assert!(none.contains("none of 1 run(s) in"), "{none}");
        assert!(
            list.contains("interrupted") && !list.contains("in progress"),
            "{list}"
        );
    }

    fn status_of(reply: &Reply) -> u16 {
        status(reply)
    }

    #[test]
    fn the_kb_page_matches_a_chosen_run_s_recorded_stack_and_says_why() {
        use gpuprobe_model::{GpuInfo, Vendor};
        let root = tempfile::tempdir().unwrap();
        let name = "check-2026-11-22T10-04-05-1";
        let run = root.path().join(name);
        std::fs::create_dir_all(run.join("workers")).unwrap();
        // A report recorded on an AMD gfx1100 Linux host, no results: RKB-001's stack.
        let mut gpu = GpuInfo::new(Vendor::Amd);
        gpu.index = Some(0);
        gpu.native_isa = Some("gfx1100".into());
        gpu.runtime_isa = Some("gfx1100".into());
        let mut report: gpuprobe_model::Report = serde_json::from_value(json!({
            "schema_version": 1, "tool_version": "0.1.0", "command": "check",
            "started_at": "2026-11-22T10:04:05Z", "wall_s": 1.0, "tier": "quick",
            "fingerprint": gpuprobe_model::Fingerprint::default(),
            "results": [], "findings": [],
            "summary": gpuprobe_model::Summary::of(&[]),
            "exit_status": "all_passed", "exit_code": 0
        }))
        .unwrap();
        report.fingerprint.host.os = Some("linux".into());
        report.fingerprint.gpus = vec![gpu];
        std::fs::write(
            RunFiles::at(&run).file(gpuprobe_runner::REPORT_FILE),
            serde_json::to_string(&report).unwrap(),
        )
        .unwrap();
        let s = state(root.path());
        let kb = |run: &str| {
            let q = vec![("run".to_string(), run.to_string())];
            match route(&s, false, "/kb", &q, &[]) {
                Reply::Page(200, html) => html,
                other => panic!("{other:?}"),
            }
        };
        let html = kb(name);
        assert!(html.contains(&format!("Matching the run {name}")), "{html}");
        assert!(html.contains("RKB-001"), "{html}");
        assert!(html.contains("gfx1100 matches gfx11*"), "{html}");
        for bad in ["check-2026-11-22T10-04-06-1", "../etc", "<script>"] {
            let html = kb(bad);
            assert!(html.contains("no run"), "{html}");
            assert!(!html.contains("<script>"), "{html}");
        }
    }

    #[test]
    fn the_kb_page_searches_and_matches_the_newest_check() {
        let root = tempfile::tempdir().unwrap();
        let s = state(root.path());
        let q = vec![("q".to_string(), "<script>".to_string())];
        let Reply::Page(200, html) = route(&s, false, "/kb", &q, &[]) else {
            panic!()
        };
        assert!(html.contains("Entries (0"), "{html}");
        assert!(
            html.contains("No finished check to match against"),
            "{html}"
        );
        assert!(!html.contains("<script>"), "{html}");
    }
}
