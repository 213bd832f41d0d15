//! The root module every plugin exports, and the plain C symbols read before
//! it is loaded.

use abi_stable::library::RootModule;
use abi_stable::sabi_types::VersionStrings;
use abi_stable::std_types::RResult;
use abi_stable::{StableAbi, declare_root_module_statics, package_version_strings};

use crate::plugin::ffi::RegBox;
use crate::plugin::types::PluginError;

/// Major version of the plugin ABI, returned by the plain C symbol
/// `backplane_plugin_abi_version`. Bumped only on a breaking change;
/// additions are new extension symbols ([`ext`](super::ext)) and keep this
/// number.
pub const ABI_VERSION: u32 = 1;

/// Name of the plain C symbol `extern "C" fn() -> u32` giving [`ABI_VERSION`].
pub const ABI_VERSION_SYMBOL: &str = "backplane_plugin_abi_version";

/// Name of the plain C symbol `extern "C" fn() -> u32` giving the variant's
/// score on this machine: 0 = cannot run here, higher = better variant. It
/// must only read CPU and OS facts, never execute an instruction the CPU may
/// lack.
pub const SCORE_SYMBOL: &str = "backplane_plugin_score";

/// The root module of a plugin (an `abi_stable` prefix type: fields are only
/// ever appended after the last prefix field; but abi_stable refuses a
/// plugin with fewer fields than the host declares, so new entry points go
/// into [`ext`](super::ext) symbols instead).
#[repr(C)]
#[derive(StableAbi)]
#[sabi(kind(Prefix(prefix_ref = PluginModRef)))]
#[sabi(missing_field(panic))]
pub struct PluginMod {
    /// Same as the `backplane_plugin_abi_version` symbol.
    pub abi_version: extern "C" fn() -> u32,
    /// Same as the `backplane_plugin_score` symbol.
    pub score: extern "C" fn() -> u32,
    /// Creates the backend registration (enumerates devices); called once.
    #[sabi(last_prefix_field)]
    pub new_reg: extern "C" fn() -> RResult<RegBox, PluginError>,
}

impl RootModule for PluginModRef {
    declare_root_module_statics! {PluginModRef}
    const BASE_NAME: &'static str = "backplane_plugin";
    const NAME: &'static str = "backplane_plugin";
    const VERSION_STRINGS: VersionStrings = package_version_strings!();
}
