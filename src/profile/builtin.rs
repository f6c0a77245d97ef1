//! The profile library compiled into the binary: the text of every
//! `config/profiles/*.toml`, by name. Data only: parsing is `build`'s, and
//! finding a profile on disk is `config::profiles`'.

/// Profiles compiled into the binary: `config/profiles/*.toml`.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "abb-b2x",
        include_str!("../../config/profiles/abb-b2x.toml"),
    ),
    (
        "alpha-ess",
        include_str!("../../config/profiles/alpha-ess.toml"),
    ),
    (
        "carlo-gavazzi-em24",
        include_str!("../../config/profiles/carlo-gavazzi-em24.toml"),
    ),
    (
        "deye-hybrid",
        include_str!("../../config/profiles/deye-hybrid.toml"),
    ),
    (
        "eastron-sdm630",
        include_str!("../../config/profiles/eastron-sdm630.toml"),
    ),
    (
        "eastron-sdm72",
        include_str!("../../config/profiles/eastron-sdm72.toml"),
    ),
    (
        "foxess-h3",
        include_str!("../../config/profiles/foxess-h3.toml"),
    ),
    (
        "goodwe-et",
        include_str!("../../config/profiles/goodwe-et.toml"),
    ),
    (
        "growatt-sph",
        include_str!("../../config/profiles/growatt-sph.toml"),
    ),
    (
        "growatt-tl",
        include_str!("../../config/profiles/growatt-tl.toml"),
    ),
    (
        "huawei-luna2000",
        include_str!("../../config/profiles/huawei-luna2000.toml"),
    ),
    (
        "janitza-umg",
        include_str!("../../config/profiles/janitza-umg.toml"),
    ),
    (
        "kostal-plenticore",
        include_str!("../../config/profiles/kostal-plenticore.toml"),
    ),
    (
        "sma-storage",
        include_str!("../../config/profiles/sma-storage.toml"),
    ),
    (
        "sofar-hyd",
        include_str!("../../config/profiles/sofar-hyd.toml"),
    ),
    (
        "solaredge-storage",
        include_str!("../../config/profiles/solaredge-storage.toml"),
    ),
    (
        "solax-hybrid-g4",
        include_str!("../../config/profiles/solax-hybrid-g4.toml"),
    ),
    (
        "solis-hybrid",
        include_str!("../../config/profiles/solis-hybrid.toml"),
    ),
    (
        "sungrow-sh",
        include_str!("../../config/profiles/sungrow-sh.toml"),
    ),
    (
        "victron-gx",
        include_str!("../../config/profiles/victron-gx.toml"),
    ),
];

/// Names of the built-in profiles.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}
