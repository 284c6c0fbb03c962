//! The page templates and the static files: minijinja with HTML autoescaping on every
//! template, as the HTML report renders, so each value from a run or a log is escaped by
//! the engine and never by hand. The stylesheet is the report's own
//! ([`gpuprobe_report::HTML_STYLESHEET`]) with the page's few rules after it.

use minijinja::{AutoEscape, Environment};
use serde::Serialize;

/// The templates, by name.
const TEMPLATES: [(&str, &str); 10] = [
    ("base.html", include_str!("../templates/base.html")),
    ("runs.html", include_str!("../templates/runs.html")),
    ("compare.html", include_str!("../templates/compare.html")),
    ("check.html", include_str!("../templates/check.html")),
    ("live.html", include_str!("../templates/live.html")),
    ("message.html", include_str!("../templates/message.html")),
    ("profiles.html", include_str!("../templates/profiles.html")),
    ("profile.html", include_str!("../templates/profile.html")),
    ("kb.html", include_str!("../templates/kb.html")),
    ("fix.html", include_str!("../templates/fix.html")),
];

/// A file served as it is: its content type and bytes.
pub(crate) fn asset(path: &str) -> Option<(&'static str, &'static str)> {
    match path {
        "/static/report.css" => Some(("text/css; charset=utf-8", gpuprobe_report::HTML_STYLESHEET)),
        "/static/ui.css" => Some(("text/css; charset=utf-8", include_str!("../static/ui.css"))),
        "/static/ui.js" => Some((
            "text/javascript; charset=utf-8",
            include_str!("../static/ui.js"),
        )),
        _ => None,
    }
}

/// The templates, loaded once.
pub(crate) struct Pages {
    env: Environment<'static>,
}

impl Default for Pages {
    fn default() -> Self {
        Self::new()
    }
}

impl Pages {
    /// Loads every template (a broken one is a defect of gpuprobe's own, caught by the
    /// tests).
    pub(crate) fn new() -> Pages {
        let mut env = Environment::new();
        env.set_auto_escape_callback(|_| AutoEscape::Html);
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .unwrap_or_else(|e| panic!("template {name}: {e}"));
        }
        Pages { env }
    }

    /// Renders `name` with `context`; a failure renders as an escaped message instead.
    pub(crate) fn render<S: Serialize>(&self, name: &str, context: S) -> String {
        self.env
            .get_template(name)
            .and_then(|t| t.render(context))
            .unwrap_or_else(|e| {
                let text = format!("cannot render {name}: {e}");
                format!(
                    "<!DOCTYPE html><title>error</title><p>{}</p>",
                    escape(&text)
                )
            })
    }
}

/// HTML-escapes `text` the way the templates do (for the one page made without them).
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const EVIL: &str = "<script>alert(1)</script>\"'&";

    #[test]
    fn every_value_from_a_run_is_escaped() {
        let pages = Pages::new();
        let row = json!({"name": EVIL, "command": "check", "started_at": EVIL, "tier": EVIL,
            "state": "finished", "outcome": "fail", "verdicts": EVIL, "exit_code": 1,
            "stack": EVIL, "simulated": true, "problem": EVIL});
        let html = pages.render(
            "runs.html",
            json!({"rows": [row], "total": 1, "root": EVIL,
                "filter": {"outcome": "", "tier": "", "stack": EVIL}}),
        );
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"),
            "{html}"
        );
        let html = pages.render(
            "live.html",
            json!({"name": EVIL, "state": EVIL, "done": 1, "total": 2, "live": true, "token": "t",
                "results": [{"probe": EVIL, "device": "cpu", "verdict": "FAIL", "class": "bad"}],
                "job": {"running": true, "log": [EVIL]}, "path": EVIL}),
        );
        assert!(!html.contains("<script>alert"), "{html}");
        let html = pages.render(
            "compare.html",
            json!({"names": [EVIL], "a": EVIL, "b": EVIL, "c": {"still_passing": 0,
                "newly_failing": [{"probe": EVIL, "device": "0", "before": "-", "after": "FAIL", "detail": EVIL}],
                "cured": [], "still_failing": [],
                "stack": [{"area": "driver", "fact": EVIL, "before": EVIL, "after": EVIL}],
                "findings_before": [{"id": EVIL, "severity": "error", "title": EVIL}], "findings_after": []}}),
        );
        assert!(!html.contains("<script>alert"), "{html}");
        assert!(html.contains("Newly failing in B (1)"), "{html}");
        assert_eq!(
            escape(EVIL),
            "&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#x27;&amp;"
        );
    }

    #[test]
    fn every_template_renders_and_loads_only_its_own_files() {
        let pages = Pages::new();
        let html = pages.render(
            "check.html",
            json!({"root": "/r", "token": "t", "presets": [],
                "form": {"tier": "quick", "device": "all", "only": "", "simulate": ""}}),
        );
        assert!(html.contains("name=\"token\" value=\"t\""), "{html}");
        let html = pages.render("message.html", json!({"title": "x", "message": "y"}));
        for url in ["/static/report.css", "/static/ui.css", "/static/ui.js"] {
            assert!(html.contains(url), "{url}");
            assert!(asset(url).is_some(), "{url}");
        }
        assert!(!html.contains("http"), "no absolute URL: {html}");
        assert!(asset("/static/../Cargo.toml").is_none());
        assert!(
            !gpuprobe_report::HTML_STYLESHEET.contains("url("),
            "the stylesheet loads nothing"
        );
    }
}
