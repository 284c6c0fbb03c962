//! `gpuprobe ui`: a local web application over the runs directory. It lists every run of
//! this machine, serves a run's HTML report, compares two runs, starts, watches and stops a
//! `check` run as a child `gpuprobe check` process, shows the profiles `fix` wrote (export,
//! delete) and searches the KB, matching it against this machine.
//!
//! The seam: [`Ui::start`] binds the server and makes its token, [`Ui::url`] is what the
//! user opens, [`Ui::serve`] answers requests until the process ends. Everything the pages
//! read of a run goes through `gpuprobe_runner`'s run directory readers; every page is a
//! minijinja template with HTML autoescaping, as the HTML report is.
//!
//! Safety: the server binds 127.0.0.1 unless told otherwise, and answers nothing without the
//! per-start token (the `gate` module), takes only the Host names of the address it is
//! bound to (a page of another site resolving its name to 127.0.0.1 gets nothing), serves
//! no file it did not name itself (`run_index::run_path`), and every page carries a policy
//! that loads nothing from anywhere else.
//!
//! The surface is [`Ui`], [`UiOptions`], [`UiError`] and [`Stopper`]; every module is
//! private, so `unreachable_pub` flags a `pub` item no other crate can reach.

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;

mod compare;
mod gate;
mod jobs;
mod kb;
mod pages;
mod profiles;
mod run_index;
mod server;

use gate::Token;

/// What `gpuprobe ui` was asked.
#[derive(Debug, Clone)]
pub struct UiOptions {
    /// The address to listen on (127.0.0.1 unless the user says otherwise).
    pub bind: IpAddr,
    /// The port; 0 picks any free one.
    pub port: u16,
    /// The runs directory whose runs are shown, and where started checks go.
    pub runs_root: PathBuf,
    /// The gpuprobe binary that runs a started check (the running one).
    pub exe: PathBuf,
    /// `--python` for the checks started from the page, when given.
    pub python: Option<PathBuf>,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum UiError {
    /// Something else listens on that address and port.
    #[error(
        "cannot listen on {addr}: the port is in use (pass another with --port, or --port 0 for any free one)"
    )]
    PortInUse {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// Any other failure to listen (an address this machine does not have, a privileged
    /// port).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The OS gave no random bytes for the token.
    #[error("cannot make the access token: the OS random source failed: {0}")]
    Random(String),
}

impl gpuprobe_model::ClassifiedError for UiError {
    /// Each is the user's to fix: another port, another address.
    fn exit_status(&self) -> gpuprobe_model::ExitStatus {
        match self {
            UiError::Random(_) => gpuprobe_model::ExitStatus::InternalFailure,
            _ => gpuprobe_model::ExitStatus::UsageError,
        }
    }
}

/// A started server: bound, with its token, not yet answering.
pub struct Ui {
    server: tiny_http::Server,
    state: Arc<server::State>,
    url: String,
}

impl Ui {
    /// Binds the address and makes the token. A port in use is [`UiError::PortInUse`].
    pub fn start(options: UiOptions) -> Result<Ui, UiError> {
        let asked = SocketAddr::new(options.bind, options.port);
        let listener = TcpListener::bind(asked).map_err(|source| {
            if source.kind() == std::io::ErrorKind::AddrInUse {
                UiError::PortInUse { addr: asked }
            } else {
                UiError::Bind {
                    addr: asked,
                    source,
                }
            }
        })?;
        let bound = listener.local_addr().map_err(|source| UiError::Bind {
            addr: asked,
            source,
        })?;
        let token = Token::random().map_err(UiError::Random)?;
        let server =
            tiny_http::Server::from_listener(listener, None).map_err(|e| UiError::Bind {
                addr: asked,
                source: std::io::Error::other(e.to_string()),
            })?;
        let url = gate::start_url(bound, &token);
        let state = Arc::new(server::State::new(options, bound, token));
        Ok(Ui { server, state, url })
    }

    /// What stops the checks and fixes this server started, for the binary's signal
    /// handling: when the server is ended, so are they, as Ctrl-C ends a check.
    pub fn stopper(&self) -> Stopper {
        Stopper(Arc::clone(&self.state))
    }

    /// The URL to open: the address and the token.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Answers requests until the process ends, each on a thread of its own (a page
    /// watching a check holds its connection open).
    pub fn serve(self) {
        for request in self.server.incoming_requests() {
            let state = Arc::clone(&self.state);
            std::thread::spawn(move || server::answer(&state, request));
        }
    }
}

/// Stops the runs a server started ([`Ui::stopper`]).
#[derive(Clone)]
pub struct Stopper(Arc<server::State>);

impl Stopper {
    /// Sends SIGINT to every run still going and waits up to `wait` for them to end; how
    /// many were going.
    pub fn stop_all(&self, wait: std::time::Duration) -> usize {
        self.0.jobs().stop_all(wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(port: u16) -> UiOptions {
        UiOptions {
            bind: "127.0.0.1".parse().unwrap(),
            port,
            runs_root: "/nonexistent".into(),
            exe: "/bin/false".into(),
            python: None,
        }
    }

    #[test]
    fn port_0_takes_a_free_port_and_a_port_in_use_is_a_usage_error() {
        use gpuprobe_model::{ClassifiedError, ExitStatus};
        let ui = Ui::start(options(0)).unwrap();
        let url = ui.url().to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        let port: u16 = url["http://127.0.0.1:".len()..]
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_ne!(port, 0);
        let token = url.split("?token=").nth(1).unwrap();
        assert_eq!(token.len(), 64, "{url}");
        let err = Ui::start(options(port)).err().expect("the port is taken");
        assert!(matches!(err, UiError::PortInUse { .. }), "{err}");
        assert!(err.to_string().contains("the port is in use"), "{err}");
        assert_eq!(err.exit_status(), ExitStatus::UsageError);
        assert_ne!(
            Ui::start(options(0)).unwrap().url().split("?token=").nth(1),
            Some(token),
            "each start makes its own token"
        );
    }
}
