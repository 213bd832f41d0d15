//! [`export_plugin!`](crate::export_plugin) and the helpers its expansion calls.

use std::panic::{AssertUnwindSafe, catch_unwind};

use abi_stable::prefix_type::PrefixTypeTrait;
use abi_stable::std_types::RResult;

use crate::plugin::contract::Reg;
use crate::plugin::ffi::{RegBox, reg_object};
use crate::plugin::module::{PluginMod, PluginModRef};
use crate::plugin::types::PluginError;

/// Name of the `static` holding abi_stable's `LibHeader`
/// (`abi_stable::library::ROOT_MODULE_LOADER_NAME`); spelled out in
/// `export_plugin!` because a macro cannot compute an identifier.
pub const ROOT_MODULE_LOADER: &str = "_1as_0lib_1header_0root_bmodule_bloader";

#[doc(hidden)]
pub fn score(f: impl FnOnce() -> u32) -> u32 {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(0)
}

#[doc(hidden)]
pub fn new_reg<R: Reg>(f: impl FnOnce() -> R) -> RResult<RegBox, PluginError> {
    match catch_unwind(AssertUnwindSafe(|| reg_object(f()))) {
        Ok(r) => RResult::ROk(r),
        Err(p) => RResult::RErr(PluginError::panicked("plugin init", &*p)),
    }
}

#[doc(hidden)]
pub fn root_module(
    abi_version: extern "C" fn() -> u32,
    score: extern "C" fn() -> u32,
    new_reg: extern "C" fn() -> RResult<RegBox, PluginError>,
) -> PluginModRef {
    PluginMod {
        abi_version,
        score,
        new_reg,
    }
    .leak_into_prefix()
}

/// Exports a backend from a `cdylib`: the `abi_stable` root module plus the
/// plain C symbols `backplane_plugin_abi_version` and `backplane_plugin_score`
/// and the extension symbols of [`ext`](crate::plugin::ext).
///
/// `reg` is an expression building the [`Reg`](crate::plugin::Reg) (run once,
/// when the host loads the plugin); `score` an expression giving this
/// variant's `u32` score (0 = unusable here). Both run under `catch_unwind`:
/// a panicking `reg` refuses the plugin with the panic message, a panicking
/// `score` reads as 0. The optional `options` is the backend's option
/// schema, a `&'static [OptionSpec]` (see
/// [`support::options`](crate::support::options)), exported through the
/// [`ext_options`](crate::plugin::ext_options) extension. Use it once per
/// crate, at the crate root.
///
/// ```ignore
/// backplane_abi::export_plugin! {
///     reg: my_backend::MyReg::new(),
///     score: 1,
///     options: my_backend::OPTIONS,
/// }
/// ```
#[macro_export]
macro_rules! export_plugin {
    (reg: $reg:expr, score: $score:expr $(,)?) => {
        $crate::export_plugin! { reg: $reg, score: $score, options: &[] }
    };
    (reg: $reg:expr, score: $score:expr, options: $options:expr $(,)?) => {
        /// The plugin ABI major version this library was built for.
        #[unsafe(no_mangle)]
        pub extern "C" fn backplane_plugin_abi_version() -> u32 {
            $crate::plugin::ABI_VERSION
        }

        /// This variant's score on this machine (0 = unusable).
        #[unsafe(no_mangle)]
        pub extern "C" fn backplane_plugin_score() -> u32 {
            $crate::plugin::export::score(|| $score)
        }

        #[doc(hidden)]
        extern "C" fn __backplane_new_reg() -> $crate::abi_stable::std_types::RResult<
            $crate::plugin::RegBox,
            $crate::plugin::PluginError,
        > {
            $crate::plugin::export::new_reg(|| $reg)
        }

        /// Extension: the devices' extra buffer types for weights.
        #[unsafe(no_mangle)]
        pub extern "C" fn backplane_plugin_extra_buffer_types_v1()
        -> $crate::plugin::ext::ExtEntry<$crate::plugin::ext::ExtraBufferTypesV1> {
            $crate::plugin::ext::exported_extra_buffer_types_entry()
        }

        #[doc(hidden)]
        extern "C" fn __backplane_options_schema()
        -> $crate::abi_stable::std_types::RVec<$crate::plugin::ext_options::FfiOptionSpec> {
            $crate::plugin::ext_options::schema_of(|| {
                let schema: &'static [$crate::plugin::ext_options::OptionSpec] = $options;
                schema
            })
        }

        #[doc(hidden)]
        static __BACKPLANE_OPTIONS_V1: $crate::plugin::ext_options::BackendOptionsV1 =
            $crate::plugin::ext_options::BackendOptionsV1 {
                schema: __backplane_options_schema,
            };

        /// Extension: the backend's option schema.
        #[unsafe(no_mangle)]
        pub extern "C" fn backplane_plugin_options_v1()
        -> $crate::plugin::ext::ExtEntry<$crate::plugin::ext_options::BackendOptionsV1> {
            $crate::plugin::ext_options::entry(&__BACKPLANE_OPTIONS_V1)
        }

        #[doc(hidden)]
        fn __backplane_root_module() -> $crate::plugin::PluginModRef {
            $crate::plugin::export::root_module(
                backplane_plugin_abi_version,
                backplane_plugin_score,
                __backplane_new_reg,
            )
        }

        /// abi_stable's library header (what `lib_header_from_path` reads).
        #[unsafe(no_mangle)]
        pub static _1as_0lib_1header_0root_bmodule_bloader: $crate::abi_stable::library::LibHeader = {
            extern "C" fn erased() -> $crate::abi_stable::library::RootModuleResult {
                $crate::abi_stable::library::__call_root_module_loader(__backplane_root_module)
            }
            // SAFETY: `erased` returns the root module of type PluginModRef,
            // the type named here, as abi_stable's #[export_root_module] does.
            unsafe {
                $crate::abi_stable::library::LibHeader::from_constructor::<$crate::plugin::PluginModRef>(
                    erased,
                    $crate::abi_stable::library::CheckTypeLayout::Yes,
                )
            }
        };
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn root_module_loader_name_matches_abi_stable() {
        assert_eq!(
            super::ROOT_MODULE_LOADER,
            abi_stable::library::ROOT_MODULE_LOADER_NAME
        );
    }
}
