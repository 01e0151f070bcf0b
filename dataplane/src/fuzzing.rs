//! Entry points for the fuzz targets (`fuzz/`, cargo-fuzz on nightly) and for the corpus
//! replay test that runs every committed input on stable. Each takes arbitrary bytes, must
//! never panic, and returns whether the input got past parsing to its checks.

use prost::Message;
use rollcall_api::delta::{Assembled, Assembler};
use rollcall_api::proto::v1 as pb;
use rollcall_api::roster::PoolRef;

use crate::config::SidecarConfig;
use crate::roster::PoolBinding;
use crate::roster::book::Book;

/// A Watch stream as a hostile or broken controller could send it: the input is a sequence of
/// `RosterUpdate`s, each behind a two-byte big-endian length (byte 0 of a message flags a new
/// stream first), fed through the delta `Assembler` into the sidecar's `Book` exactly as
/// `roster::watch` does, the routing config rebuilt after every change. What must hold: no
/// panic, a pool of the book is never one the sidecar did not ask for, and the config it
/// builds always passes the sidecar's own validation and survives its JSON round trip.
pub fn roster_stream(mut data: &[u8]) -> bool {
    let bindings = [
        PoolBinding {
            pool: PoolRef::new("shop", "web"),
            listen: ([127, 0, 0, 1], 9000).into(),
        },
        PoolBinding {
            pool: PoolRef::new("shop", "api"),
            listen: ([127, 0, 0, 1], 9001).into(),
        },
    ];
    let mut book = Book::new(&bindings);
    let mut assembler = Assembler::new();
    let mut changed = false;
    while data.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([data[0], data[1]]));
        let body = &data[2..];
        let (message, rest) = body.split_at(len.min(body.len()));
        data = rest;
        let Some((&flags, bytes)) = message.split_first() else {
            continue;
        };
        if flags & 1 == 1 {
            book.new_stream();
            assembler.new_stream();
        }
        let Ok(update) = pb::RosterUpdate::decode(bytes) else {
            continue;
        };
        let complete = match assembler.accept(update) {
            Ok(Assembled::Complete(update)) => update,
            Ok(Assembled::Partial) | Err(_) => continue,
        };
        let outcome = book.apply(complete);
        if let Some(pool) = outcome.changed() {
            changed = true;
            let one = book
                .pool_config(pool)
                .expect("a changed pool is in the book");
            let config = book.config();
            assert!(config.pools.contains(&one), "{outcome}");
            assert!(config.pools.len() <= bindings.len(), "{outcome}");
            // The sidecar applies the book's config as built, never re-parsed from text: so
            // its own validation rules, and a JSON round trip for what it serializes (the YAML
            // parser refuses characters JSON allows, such as DEL in a zone name, and no
            // path of the sidecar reads a built config back as YAML).
            let problems = config.problems();
            let text = serde_json::to_string(&config).expect("a config serializes");
            assert!(
                problems.is_empty(),
                "the book built a config the sidecar refuses: {problems:?}\n{text}"
            );
            let again: SidecarConfig = serde_json::from_str(&text).expect("its JSON parses");
            assert_eq!(again, config, "the JSON round trip changed the config");
        }
    }
    changed
}

/// The sidecar's config file, as a person or a tool could write it: parse and validate, and
/// what parses must parse again from its own serialization.
pub fn config_file(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let Ok(config) = SidecarConfig::parse(text, "fuzz") else {
        return false;
    };
    let json = serde_json::to_string(&config).expect("a config serializes");
    if let Err(error) = SidecarConfig::parse(&json, "fuzz") {
        panic!("a config that parsed does not parse from its own JSON: {error}\n{json}");
    }
    true
}
