//! Build script: embeds every SQL migration of `src/store/migrations/` into the
//! binary, in file-name order, so adding a migration is adding one `.sql` file.
//!
//! It must not do anything else (no code generation beyond the migration list, no
//! network, no C toolchain work of its own).

use std::fmt::Write as _;
use std::path::Path;
use std::{env, fs};

const DIR: &str = "src/store/migrations";

fn main() {
    #[allow(
        clippy::print_stdout,
        reason = "cargo reads build script directives from stdout"
    )]
    {
        println!("cargo::rerun-if-changed={DIR}");
    }
    let manifest = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest).join(DIR);
    let mut ids: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".sql").map(str::to_string)
        })
        .collect();
    ids.sort();
    for id in &ids {
        let (number, rest) = id.split_once('_').unwrap_or((id, ""));
        let well_formed = number.len() == 4
            && number.bytes().all(|b| b.is_ascii_digit())
            && !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        assert!(
            well_formed,
            "migration {id}.sql: name it NNNN_snake_case.sql (four digits, then a name)"
        );
    }
    let mut out = String::from("&[\n");
    for id in &ids {
        let path = dir.join(format!("{id}.sql"));
        writeln!(
            out,
            "    ({id:?}, include_str!({:?})),",
            path.display().to_string()
        )
        .expect("writing to a String cannot fail");
    }
    out.push_str("]\n");
    let out_dir = env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    fs::write(Path::new(&out_dir).join("migrations.rs"), out).expect("cannot write migrations.rs");
}
