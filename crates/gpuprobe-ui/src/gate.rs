//! Who may talk to the server: the per-start token, the Host header, and the cross-site
//! checks of a form post. Also the small URL pieces the gate and the routes share: the
//! query string and form bodies, percent-decoded.
//!
//! The token is 32 random bytes from the OS, written in hex. The user's first request
//! carries it in the URL's query (`?token=`); the answer sets it as a cookie (HttpOnly: no
//! script reads it; SameSite=Strict: no other site's page sends it) and sends the browser
//! on to the same page without it, so it leaves the address bar. Every later request
//! carries the cookie. A form post carries the token in its body as well, so a page that
//! could make the browser send the cookie still cannot post without knowing the token.
//!
//! The Host header must name the address the server is bound to (or, on the loopback,
//! `localhost`): a site that points its own name at 127.0.0.1 (DNS rebinding) sends its own
//! name and is refused before the token is looked at.

use std::fmt::Write as _;
use std::net::SocketAddr;

/// The cookie that carries the token after the first request, by the server's port: a
/// browser keeps cookies by host, not by port, so two servers on one machine keep a cookie
/// each.
pub(crate) fn cookie_name(port: u16) -> String {
    format!("gpuprobe_ui_{port}")
}
/// The query parameter and form field that carry it.
pub(crate) const PARAM: &str = "token";

/// The per-start secret.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// 32 bytes from the OS's random source, in hex.
    pub(crate) fn random() -> Result<Token, String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| e.to_string())?;
        Ok(Token(bytes.iter().fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })))
    }

    /// A token of known text (tests).
    #[cfg(test)]
    pub(crate) fn from_text(text: &str) -> Token {
        Token(text.to_string())
    }

    /// Its text, for the URL, the cookie and the forms.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `offered` is the token, compared in time that does not depend on where
    /// they differ.
    pub(crate) fn matches(&self, offered: &str) -> bool {
        let (a, b) = (self.0.as_bytes(), offered.as_bytes());
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// The URL the user opens first.
pub(crate) fn start_url(bound: SocketAddr, token: &Token) -> String {
    format!("http://{}/?{PARAM}={}", host_of(bound), token.as_str())
}

/// `127.0.0.1:8080`, `[::1]:8080`.
fn host_of(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("{}:{}", a.ip(), a.port()),
        SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
    }
}

/// Whether a request's Host header names the server: its bound address, `localhost` when it
/// is bound to the loopback, and, bound to every address (`0.0.0.0`, `::`), any IP literal
/// with its port (a name could be anyone's).
pub(crate) fn host_allowed(host: Option<&str>, bound: SocketAddr) -> bool {
    let Some(host) = host.map(str::trim) else {
        return false;
    };
    let port = bound.port();
    let Some((name, host_port)) = host.rsplit_once(':') else {
        return false;
    };
    if host_port.parse::<u16>().ok() != Some(port) {
        return false;
    }
    let literal = name.trim_start_matches('[').trim_end_matches(']');
    let ip: Option<std::net::IpAddr> = literal.parse().ok();
    let ip_matches = |ip: std::net::IpAddr| {
        ip == bound.ip()
            || (bound.ip().is_loopback() && ip.is_loopback())
            || bound.ip().is_unspecified()
    };
    match ip {
        Some(ip) => ip_matches(ip),
        None => name.eq_ignore_ascii_case("localhost") && bound.ip().is_loopback(),
    }
}

/// Whether an `Origin` header, when the browser sent one, is the server's own (a post from
/// another site's page is refused even before its token is looked at).
pub(crate) fn origin_allowed(origin: Option<&str>, bound: SocketAddr) -> bool {
    match origin {
        None => true,
        Some(origin) => origin
            .strip_prefix("http://")
            .is_some_and(|host| host_allowed(Some(host), bound)),
    }
}

/// The token a `Cookie` header carries for the server on `port`, if any.
pub(crate) fn cookie_token(header: Option<&str>, port: u16) -> Option<&str> {
    let wanted = cookie_name(port);
    header?.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == wanted).then_some(value)
    })
}

/// The `Set-Cookie` value that hands the browser the token of the server on `port`.
pub(crate) fn set_cookie(token: &Token, port: u16) -> String {
    format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict",
        cookie_name(port),
        token.as_str()
    )
}

/// What the gate decides about one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Answer it.
    Pass,
    /// The token came in the query: set the cookie and send the browser to this URL (the
    /// same, without the token).
    SetCookieAndGo(String),
    /// Refuse it (403), with why.
    Refuse(&'static str),
}

/// One request as the gate sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Credentials<'a> {
    /// Whether it is a POST (which must carry the token in its form too).
    pub post: bool,
    /// The path, without the query.
    pub path: &'a str,
    /// The query's pairs.
    pub query: &'a [(String, String)],
    /// The Host header.
    pub host: Option<&'a str>,
    /// The Origin header.
    pub origin: Option<&'a str>,
    /// The Cookie header.
    pub cookie: Option<&'a str>,
    /// A POST's form pairs.
    pub form: &'a [(String, String)],
}

/// Decides whether a request is let through.
pub(crate) fn decide(request: &Credentials<'_>, token: &Token, bound: SocketAddr) -> Decision {
    if !host_allowed(request.host, bound) {
        return Decision::Refuse("the Host header does not name this server");
    }
    let from_query = request
        .query
        .iter()
        .find(|(name, _)| name == PARAM)
        .map(|(_, v)| v.as_str());
    let cookie_ok = cookie_token(request.cookie, bound.port()).is_some_and(|t| token.matches(t));
    if request.post {
        if !origin_allowed(request.origin, bound) {
            return Decision::Refuse("a form of another site");
        }
        let in_form = request
            .form
            .iter()
            .find(|(name, _)| name == PARAM)
            .is_some_and(|(_, v)| token.matches(v));
        return if cookie_ok && in_form {
            Decision::Pass
        } else {
            Decision::Refuse("the form does not carry this server's token")
        };
    }
    match from_query {
        Some(offered) if token.matches(offered) => {
            let rest: Vec<(String, String)> = request
                .query
                .iter()
                .filter(|(name, _)| name != PARAM)
                .cloned()
                .collect();
            Decision::SetCookieAndGo(with_query(request.path, &rest))
        }
        Some(_) => Decision::Refuse("a wrong token"),
        None if cookie_ok => Decision::Pass,
        None => Decision::Refuse(
            "no token: open the URL that `gpuprobe ui` printed (it carries the token)",
        ),
    }
}

/// `path?a=1&b=2`, each value percent-encoded.
pub(crate) fn with_query(path: &str, pairs: &[(String, String)]) -> String {
    if pairs.is_empty() {
        return path.to_string();
    }
    let query: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    format!("{path}?{}", query.join("&"))
}

/// Percent-encodes everything but unreserved characters.
pub(crate) fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// Decodes `a=1&b=x%20y` (a query or a form body; `+` is a space). Pairs that are not
/// UTF-8 once decoded are dropped.
pub(crate) fn parse_pairs(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .filter_map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            Some((decode(name)?, decode(value)?))
        })
        .collect()
}

fn decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Splits a request target into its path and query pairs.
pub(crate) fn split_target(target: &str) -> (&str, Vec<(String, String)>) {
    match target.split_once('?') {
        Some((path, query)) => (path, parse_pairs(query)),
        None => (target, Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound() -> SocketAddr {
        "127.0.0.1:8765".parse().unwrap()
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn tokens_are_random_hex_and_compared_whole() {
        let (a, b) = (Token::random().unwrap(), Token::random().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 64);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(&a.as_str()[..63]));
        assert!(!a.matches(""));
        assert_eq!(format!("{a:?}"), "Token(..)", "the token is never logged");
    }

    #[test]
    fn the_host_must_name_the_bound_address() {
        let b = bound();
        for ok in [
            "127.0.0.1:8765",
            "localhost:8765",
            "LOCALHOST:8765",
            "[::1]:8765",
        ] {
            assert!(host_allowed(Some(ok), b), "{ok}");
        }
        for bad in [
            "evil.example:8765",
            "127.0.0.1:80",
            "127.0.0.1",
            "10.0.0.1:8765",
            "",
            "localhost.evil.example:8765",
        ] {
            assert!(!host_allowed(Some(bad), b), "{bad}");
        }
        assert!(!host_allowed(None, b));
        let any: SocketAddr = "0.0.0.0:8765".parse().unwrap();
        assert!(host_allowed(Some("10.0.0.1:8765"), any));
        assert!(!host_allowed(Some("evil.example:8765"), any));
        let lan: SocketAddr = "10.0.0.1:8765".parse().unwrap();
        assert!(!host_allowed(Some("localhost:8765"), lan));
    }

    #[test]
    fn the_gate_takes_the_token_once_from_the_query_then_from_the_cookie() {
        let token = Token::from_text("abc123");
        let query = pairs(&[("token", "abc123"), ("verdict", "fail")]);
        let first = Credentials {
            path: "/",
            query: &query,
            host: Some("127.0.0.1:8765"),
            ..Default::default()
        };
        assert_eq!(
            decide(&first, &token, bound()),
            Decision::SetCookieAndGo("/?verdict=fail".into())
        );
        let cookie = format!(
            "gpuprobe_ui_9=x; {}",
            set_cookie(&token, 8765).split(';').next().unwrap()
        );
        let later = Credentials {
            path: "/runs",
            host: Some("127.0.0.1:8765"),
            cookie: Some(&cookie),
            ..Default::default()
        };
        assert_eq!(decide(&later, &token, bound()), Decision::Pass);
        // No token, a wrong one, a wrong cookie, a foreign host: refused.
        let none = Credentials {
            path: "/",
            host: Some("127.0.0.1:8765"),
            ..Default::default()
        };
        assert!(matches!(
            decide(&none, &token, bound()),
            Decision::Refuse(_)
        ));
        let wrong = pairs(&[("token", "abc124")]);
        let wrong_query = Credentials {
            query: &wrong,
            ..none.clone()
        };
        assert!(matches!(
            decide(&wrong_query, &token, bound()),
            Decision::Refuse(_)
        ));
        for cookie in ["gpuprobe_ui_8765=abc124", "gpuprobe_ui_9=abc123"] {
            // A wrong token, or another server's cookie.
            let bad_cookie = Credentials {
                cookie: Some(cookie),
                ..none.clone()
            };
            assert!(matches!(
                decide(&bad_cookie, &token, bound()),
                Decision::Refuse(_)
            ));
        }
        let rebound = Credentials {
            host: Some("evil.example:8765"),
            ..later.clone()
        };
        assert!(matches!(
            decide(&rebound, &token, bound()),
            Decision::Refuse(_)
        ));
    }

    #[test]
    fn a_post_needs_the_cookie_and_the_token_in_its_form_from_this_origin() {
        let token = Token::from_text("abc123");
        let form = pairs(&[("token", "abc123")]);
        let post = Credentials {
            post: true,
            path: "/check",
            host: Some("127.0.0.1:8765"),
            cookie: Some("gpuprobe_ui_8765=abc123"),
            form: &form,
            origin: Some("http://127.0.0.1:8765"),
            ..Default::default()
        };
        assert_eq!(decide(&post, &token, bound()), Decision::Pass);
        let no_form = Credentials {
            form: &[],
            ..post.clone()
        };
        assert!(matches!(
            decide(&no_form, &token, bound()),
            Decision::Refuse(_)
        ));
        let foreign = Credentials {
            origin: Some("http://evil.example"),
            ..post.clone()
        };
        assert!(matches!(
            decide(&foreign, &token, bound()),
            Decision::Refuse(_)
        ));
        let no_cookie = Credentials {
            cookie: None,
            ..post.clone()
        };
        assert!(matches!(
            decide(&no_cookie, &token, bound()),
            Decision::Refuse(_)
        ));
        // The query's token does not stand in for a form's.
        let query = pairs(&[("token", "abc123")]);
        let in_query = Credentials {
            form: &[],
            query: &query,
            ..post
        };
        assert!(matches!(
            decide(&in_query, &token, bound()),
            Decision::Refuse(_)
        ));
    }

    #[test]
    fn queries_and_forms_decode_and_encode_back() {
        assert_eq!(
            parse_pairs("a=1&b=x%20y+z&c&d=%2E%2e&e=%zz&f=%e2%82%ac"),
            pairs(&[
                ("a", "1"),
                ("b", "x y z"),
                ("c", ""),
                ("d", ".."),
                ("f", "€")
            ])
        );
        assert_eq!(parse_pairs("a=%"), pairs(&[("a", "%")]));
        assert_eq!(parse_pairs("a=%f"), pairs(&[("a", "%f")]));
        let (path, query) = split_target("/compare?a=x&b=y");
        assert_eq!(
            (path, query),
            ("/compare", pairs(&[("a", "x"), ("b", "y")]))
        );
        let back = with_query("/", &pairs(&[("q", "a b&c=<d>")]));
        assert_eq!(back, "/?q=a%20b%26c%3D%3Cd%3E");
        assert_eq!(split_target(&back).1, pairs(&[("q", "a b&c=<d>")]));
        assert_eq!(
            start_url(bound(), &Token::from_text("t")),
            "http://127.0.0.1:8765/?token=t"
        );
        let v6: SocketAddr = "[::1]:9".parse().unwrap();
        assert_eq!(
            start_url(v6, &Token::from_text("t")),
            "http://[::1]:9/?token=t"
        );
    }
}
