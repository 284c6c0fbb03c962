//! Knowledge base of known issues, matcher, config lint and workaround catalogue
