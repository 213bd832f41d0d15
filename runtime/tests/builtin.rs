//! The registry links no backend: without a built-in one handed over it
//! loads plugins only and says so; a handed-over one is added, or left out
//! when a plugin of its name loaded.

use backplane_runtime::registry::{
    BuiltinBackend, BuiltinStatus, Registry, RegistryOptions, SearchPath,
};

fn no_plugins() -> SearchPath {
    SearchPath::only(Vec::<std::path::PathBuf>::new())
}

#[test]
fn without_a_builtin_backend_the_registry_loads_nothing_and_says_why() {
    let reg = Registry::load(&RegistryOptions {
        search: no_plugins(),
        builtin: None,
    });
    assert!(reg.backends().is_empty());
    assert_eq!(reg.devices().count(), 0);
    assert_eq!(reg.builtin(), &BuiltinStatus::NotGiven);
    assert_eq!(
        reg.builtin().to_string(),
        "no built-in backend (none linked, or turned off)"
    );
    assert_eq!(
        RegistryOptions::default().builtin.map(|b| b.name),
        None,
        "the runtime's default hands over no backend"
    );
}

#[test]
fn a_builtin_backend_whose_registration_fails_is_reported_not_added() {
    fn failing() -> (backplane_abi::plugin::RegBox, u32) {
        use backplane_abi::plugin::{Device, Reg, reg_object};
        struct Broken;
        impl Reg for Broken {
            fn name(&self) -> String {
                panic!("no name today")
            }
            fn devices(&self) -> Vec<std::sync::Arc<dyn Device>> {
                Vec::new()
            }
        }
        (reg_object(Broken), 1)
    }
    let reg = Registry::load(&RegistryOptions {
        search: no_plugins(),
        builtin: Some(BuiltinBackend {
            name: "broken",
            register: failing,
            options: &[],
        }),
    });
    assert!(reg.backends().is_empty());
    let BuiltinStatus::Failed { name, reason } = reg.builtin() else {
        panic!("expected a failure, got {:?}", reg.builtin());
    };
    assert_eq!(name, "broken");
    assert!(reason.contains("no name today"), "{reason}");
}
