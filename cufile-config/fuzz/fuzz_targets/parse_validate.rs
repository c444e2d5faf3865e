//! Any bytes through the parser, the validator (both libcufile versions),
//! the effective configuration and the renderers: nothing may panic, every
//! diagnostic has a position inside the text, and a file without errors
//! survives model → JSON → model unchanged.

#![no_main]

use cufile_config::{
    ApiOverrides, Environment, Libcufile, ParsedConfig, ValidateOptions, library_defaults,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let lines = data.iter().filter(|&&b| b == b'\n').count() + 1;
    for library in Libcufile::ALL {
        let options = ValidateOptions {
            library,
            check_paths: false,
        };
        let parsed = ParsedConfig::from_bytes(data, &options);
        for d in &parsed.diagnostics {
            assert!(
                d.line >= 1 && d.line <= lines,
                "line {} of {lines}: {d:?}",
                d.line
            );
            assert!(d.column >= 1, "{d:?}");
            assert!(!d.message.is_empty());
            assert!(!d.message.contains("bug in cufile-config"), "{d:?}");
        }
        let _ = parsed.render("fuzz.json");
        let _ = serde_json::to_string(&parsed.diagnostics).unwrap();

        let env = Environment::from_pairs([("CUFILE_LOGGING_LEVEL", "info")]);
        let effective = parsed.effective(&env, &ApiOverrides::default());
        let _ = serde_json::to_string(&effective).unwrap();
        let execution = effective.execution().config;
        if parsed.config.execution.is_none() {
            assert_eq!(
                execution,
                library_defaults(library)
                    .execution_section()
                    .resolve(&execution)
            );
        }

        // Round trip: the model survives JSON, and valid JSON re-validates
        // to the same model.
        let json = serde_json::to_string(&parsed.config).unwrap();
        let back: cufile_config::CufileConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, parsed.config);
        if !parsed.has_errors() {
            let again = ParsedConfig::parse_with(&json, &options);
            assert_eq!(again.config, parsed.config, "{json}");
        }
    }
});
