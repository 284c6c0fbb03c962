//! Version parsing and ordering: total, consistent, never panicking.

use std::cmp::Ordering;

use gpuprobe_kb::{DottedReq, DottedVersion, Pep440Req, Pep440Version};
use proptest::prelude::*;

fn dotted_text() -> impl Strategy<Value = String> {
    let release = prop::collection::vec(0u64..30, 1..4).prop_map(|parts| {
        parts
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(".")
    });
    let suffix = prop_oneof![
        Just(String::new()),
        (1u64..40).prop_map(|n| format!("-rc{n}")),
        (1u64..40).prop_map(|n| format!("-{n}-generic")),
        (1u64..3000).prop_map(|n| format!("-{n}-oem")),
        (1u64..9).prop_map(|n| format!("-arch{n}-1")),
        Just("-fc-v657-gpu".to_string()),
        (1u64..99999).prop_map(|n| format!("a{n}")),
        (1u64..30).prop_map(|n| format!("-{n}.{n}~24.04.2")),
    ];
    (release, suffix).prop_map(|(r, s)| format!("{r}{s}"))
}

fn pep440_text() -> impl Strategy<Value = String> {
    let release = prop::collection::vec(0u64..15, 1..4).prop_map(|parts| {
        parts
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(".")
    });
    let pre = prop_oneof![
        Just(String::new()),
        (0u64..5).prop_map(|n| format!("a{n}")),
        (0u64..5).prop_map(|n| format!("b{n}")),
        (0u64..5).prop_map(|n| format!("rc{n}")),
    ];
    let post = prop_oneof![
        Just(String::new()),
        (0u64..3).prop_map(|n| format!(".post{n}"))
    ];
    let dev = prop_oneof![
        Just(String::new()),
        (0u64..30000000).prop_map(|n| format!(".dev{n}"))
    ];
    let local = prop_oneof![
        Just(String::new()),
        Just("+cu130".to_string()),
        Just("+rocm7.2.0.lw".to_string()),
        Just("+rocm7.11.0a20260106".to_string()),
    ];
    (release, pre, post, dev, local).prop_map(|(r, a, b, c, d)| format!("{r}{a}{b}{c}{d}"))
}

fn check_total_order<T: Ord + std::fmt::Debug>(a: &T, b: &T, c: &T) {
    assert_eq!(a.cmp(b), b.cmp(a).reverse());
    assert_eq!(a.cmp(a), Ordering::Equal);
    assert_eq!(a == b, a.cmp(b) == Ordering::Equal);
    if a <= b && b <= c {
        assert!(a <= c, "{a:?} <= {b:?} <= {c:?}");
    }
}

proptest! {
    #[test]
    fn dotted_parsing_never_panics(text in ".{0,40}") {
        let _ = DottedVersion::parse(&text);
        let _ = DottedReq::parse(&text);
    }

    #[test]
    fn pep440_parsing_never_panics(text in ".{0,40}") {
        let _ = Pep440Version::parse(&text);
        let _ = Pep440Req::parse(&text);
    }

    #[test]
    fn range_syntax_never_panics(text in "[<>=!,|.*0-9a-z +-]{0,30}") {
        let _ = DottedReq::parse(&text);
        let _ = Pep440Req::parse(&text);
    }

    #[test]
    fn dotted_order_is_total_and_consistent(a in dotted_text(), b in dotted_text(), c in dotted_text()) {
        let (a, b, c) = (DottedVersion::parse(&a).unwrap(), DottedVersion::parse(&b).unwrap(), DottedVersion::parse(&c).unwrap());
        check_total_order(&a, &b, &c);
    }

    #[test]
    fn pep440_order_is_total_and_consistent(a in pep440_text(), b in pep440_text(), c in pep440_text()) {
        let (a, b, c) = (Pep440Version::parse(&a).unwrap(), Pep440Version::parse(&b).unwrap(), Pep440Version::parse(&c).unwrap());
        check_total_order(&a, &b, &c);
    }

    #[test]
    fn dotted_versions_reparse_to_themselves(text in dotted_text()) {
        let version = DottedVersion::parse(&text).unwrap();
        prop_assert_eq!(DottedVersion::parse(&version.to_string()).unwrap(), version);
    }

    #[test]
    fn ranges_agree_with_comparisons(a in dotted_text(), b in dotted_text()) {
        let va = DottedVersion::parse(&a).unwrap();
        let vb = DottedVersion::parse(&b).unwrap();
        let at_least = DottedReq::parse(&format!(">={b}")).unwrap();
        let below = DottedReq::parse(&format!("<{b}")).unwrap();
        prop_assert_eq!(at_least.matches(&va), va >= vb);
        prop_assert_eq!(below.matches(&va), va < vb);
        prop_assert!(at_least.matches(&va) != below.matches(&va));
    }

    #[test]
    fn pep440_local_tags_do_not_affect_order(a in pep440_text()) {
        let version = Pep440Version::parse(&a).unwrap();
        let public = a.split('+').next().unwrap();
        prop_assert_eq!(Pep440Version::parse(public).unwrap(), version);
    }
}

#[test]
fn kernels_from_the_field_order_as_expected() {
    let v = |s: &str| DottedVersion::parse(s).unwrap();
    assert!(v("6.17.0-19-generic") >= v("6.17.0-19"));
    assert!(v("6.14.0-1018-oem") > v("6.14.0"));
    assert!(v("6.18.44-fc-v657-gpu") > v("6.18.6"));
    let range = DottedReq::parse(">=6.18.2, <6.18.7").unwrap();
    assert!(!range.matches(&v("6.18.44-fc-v657-gpu")));
    assert_eq!(range.normalized(), ">=6.18.2, <6.18.7");
}

#[test]
fn torch_versions_from_the_field_order_as_expected() {
    let p = |s: &str| Pep440Version::parse(s).unwrap();
    assert!(p("2.11.0a0+rocm7.11.0a20260106") < p("2.11.0+cu130"));
    assert!(p("2.11.0a0+rocm7.11.0a20260106") > p("2.11.0.dev20260101"));
    assert!(p("2.9.1+rocm7.2.0.lw") < p("2.10.0"));
    assert!(
        Pep440Req::parse(">=2.11.0.dev0")
            .unwrap()
            .matches(&p("2.11.0a0+rocm7.11.0a20260106"))
    );
}
