//! Option and configuration parsing, path rules included: any environment, explicit values
//! and path rules either freeze or fail with CONFIG, never panic; once frozen, every lookup
//! agrees with a model of spec 3.1 (the longest matching rule prefix that defines the option,
//! then the explicit value, then the environment).
#![no_main]

use std::collections::BTreeMap;
use std::sync::OnceLock;

use karu::fuzzing::{canonical_prefix, prefix_matches};
use karu::{Config, OptionSource, Status, option_names};
use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Name {
    Known(u8),
    Raw(String),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Set {
        name: Name,
        value: Option<String>,
    },
    SetPath {
        prefix: String,
        name: Name,
        value: Option<String>,
    },
}

#[derive(Arbitrary, Debug)]
enum Path {
    /// Below the prefix of a rule set earlier (by index).
    UnderRule(u8, String),
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    env: Vec<(u8, String)>,
    ops: Vec<Op>,
    paths: Vec<Path>,
}

/// Values one of which every option accepts.
const PROBES: [&str; 5] = ["", "1", "requester", "AUTO", "guards"];

/// For each accepted name, the index of the first name of the same option (aliases share
/// one), found through the public API: an explicit value set under one spelling is visible
/// under the other.
fn classes() -> &'static [usize] {
    static CLASSES: OnceLock<Vec<usize>> = OnceLock::new();
    CLASSES.get_or_init(|| {
        let names = option_names();
        names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let s = PROBES
                    .iter()
                    .find_map(|v| {
                        let mut c = Config::empty();
                        c.set(name, Some(v)).expect("accepted names resolve");
                        c.freeze().ok()
                    })
                    .unwrap_or_else(|| panic!("{name} accepts none of {PROBES:?}"));
                (0..=i)
                    .find(|&j| s.option_source(names[j], "") == OptionSource::Explicit)
                    .expect("a name finds its own value")
            })
            .collect()
    })
}

fn name_of(n: &Name) -> (String, Option<usize>) {
    match n {
        Name::Known(i) => {
            let i = usize::from(*i) % option_names().len();
            (option_names()[i].to_owned(), Some(classes()[i]))
        }
        Name::Raw(s) => (s.clone(), None),
    }
}

fuzz_target!(|input: Input| {
    if input.ops.len() > 64 || input.env.len() > 64 || input.paths.len() > 64 {
        return;
    }
    let names = option_names();
    // The model: option class → value, per layer; rules as (canonical prefix, values).
    let mut env = BTreeMap::new();
    let vars: Vec<(String, String)> = input
        .env
        .iter()
        .map(|(i, v)| (names[usize::from(*i) % names.len()].to_owned(), v.clone()))
        .collect();
    let mut modelled = true;
    {
        // from_vars: names match exactly, empty values are ignored, and among spellings of
        // one option the first in table order wins; a repeated name keeps its last
        // non-empty value.
        let last: BTreeMap<&str, &str> = vars
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        for (i, name) in names.iter().enumerate() {
            if let Some(v) = last.get(name) {
                env.entry(classes()[i]).or_insert((*v).to_owned());
            }
        }
    }
    let mut explicit = BTreeMap::new();
    let mut rules: Vec<(String, BTreeMap<usize, String>)> = Vec::new();

    let mut config = Config::from_vars(vars);
    for op in &input.ops {
        match op {
            Op::Set { name, value } => {
                let (text, class) = name_of(name);
                let result = config.set(&text, value.as_deref()).map(|_| ());
                match (result, class) {
                    (Ok(()), Some(class)) => match value {
                        Some(v) => {
                            explicit.insert(class, v.clone());
                        }
                        None => {
                            explicit.remove(&class);
                        }
                    },
                    (Ok(()), None) => modelled = false,
                    (Err(e), class) => {
                        assert_eq!(e.status(), Status::Config, "{e:?}");
                        assert!(class.is_none(), "known name {text} refused: {e:?}");
                    }
                }
            }
            Op::SetPath {
                prefix,
                name,
                value,
            } => {
                let (text, class) = name_of(name);
                match config.set_path(prefix, &text, value.as_deref()) {
                    Err(e) => {
                        assert_eq!(e.status(), Status::Config, "{e:?}");
                        if prefix.is_empty() {
                            assert!(e.message().contains("empty prefix"), "{e:?}");
                        }
                    }
                    Ok(_) => {
                        assert!(!prefix.is_empty());
                        let Some(class) = class else {
                            modelled = false;
                            continue;
                        };
                        let canonical = canonical_prefix(prefix);
                        let at = rules.iter().position(|(p, _)| *p == canonical);
                        match (value, at) {
                            (Some(v), Some(i)) => {
                                rules[i].1.insert(class, v.clone());
                            }
                            (Some(v), None) => {
                                rules.push((canonical, BTreeMap::from([(class, v.clone())])))
                            }
                            (None, Some(i)) => {
                                rules[i].1.remove(&class);
                                if rules[i].1.is_empty() {
                                    rules.remove(i);
                                }
                            }
                            (None, None) => {}
                        }
                    }
                }
            }
        }
    }

    let settings = match config.freeze() {
        Ok(s) => s,
        Err(e) => {
            assert_eq!(e.status(), Status::Config, "{e:?}");
            return;
        }
    };
    assert!(settings.concurrency() >= 1);
    assert!(settings.io_threads() >= 1);
    let _ = settings.http_headers();
    let _ = settings.loop_shares();
    assert!(
        settings
            .matches(&config)
            .expect("a frozen config validates")
    );

    let mut paths: Vec<String> = vec![String::new()];
    for p in &input.paths {
        match p {
            Path::UnderRule(i, rest) if !rules.is_empty() => {
                paths.push(format!("{}{rest}", rules[usize::from(*i) % rules.len()].0));
            }
            Path::UnderRule(_, rest) | Path::Raw(rest) => paths.push(rest.clone()),
        }
    }
    for path in &paths {
        let _ = settings.azure_imds_selector(path);
        for (i, name) in names.iter().enumerate() {
            let value = settings.option(name, path);
            let source = settings.option_source(name, path);
            assert_eq!(value.is_some(), source != OptionSource::Default);
            if let OptionSource::Rule(p) = source {
                assert!(prefix_matches(p, path), "{p:?} does not match {path:?}");
            }
            if !modelled {
                continue;
            }
            let class = classes()[i];
            let from_rule = rules
                .iter()
                .filter(|(p, _)| prefix_matches(p, path))
                .filter_map(|(p, values)| values.get(&class).map(|v| (p, v)))
                .max_by_key(|(p, _)| p.len());
            let (want, want_source) = match from_rule {
                Some((p, v)) => (Some(v.as_str()), OptionSource::Rule(p.as_str())),
                None => match (explicit.get(&class), env.get(&class)) {
                    (Some(v), _) => (Some(v.as_str()), OptionSource::Explicit),
                    (None, Some(v)) => (Some(v.as_str()), OptionSource::Environment),
                    (None, None) => (None, OptionSource::Default),
                },
            };
            assert_eq!(value, want, "{name} at {path:?}");
            assert_eq!(source, want_source, "{name} at {path:?}");
        }
    }
    for (prefix, _) in &rules {
        assert_eq!(
            &canonical_prefix(prefix),
            prefix,
            "canonical prefixes are stable"
        );
        assert!(prefix_matches(prefix, prefix));
    }
});
