//! The HAP power request for the HMX clock (`HAP_power.h`).
//!
//! The vote itself is made on the DSP (`HAP_power_set` exists only there);
//! the host builds it with [`HapPowerHmxV2::max_clock`] and sends it over the
//! session, so both sides agree on one layout.

/// `HAP_power_set_HMX_v2`: the request type of an HMX v2 vote (v75 and later).
pub const HAP_POWER_SET_HMX_V2: u32 = 14;
/// `HAP_DCVS_EXP_VCORNER_MAX`: the highest voltage corner.
pub const HAP_DCVS_EXP_VCORNER_MAX: u32 = 0xFFFF;
/// `HAP_CLK_PERF_HIGH`: the high-performance clock mode.
pub const HAP_CLK_PERF_HIGH: u32 = 0;

/// `HAP_power_hmx_payload_v2`, field for field (enums as `u32`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HapPowerHmxV2 {
    /// Nonzero: apply `power_up`.
    pub set_power: u8,
    /// Nonzero: power the HMX up.
    pub power_up: u8,
    /// Nonzero: apply the clock fields below.
    pub set_clock: u8,
    /// Nonzero: let the DSP pick its default corners.
    pub pick_default: u8,
    /// Target voltage corner (`HAP_dcvs_exp_voltage_corner_t`).
    pub target_corner: u32,
    /// Lowest voltage corner allowed.
    pub min_corner: u32,
    /// Highest voltage corner allowed.
    pub max_corner: u32,
    /// `HAP_clk_perf_mode_t`.
    pub perf_mode: u32,
    /// Requested frequency in MHz (0 = by corner).
    pub freq_mhz: u32,
    /// Floor frequency in MHz (0 = none).
    pub floor_freq_mhz: u32,
    /// Reserved.
    pub param1: u32,
    /// Reserved.
    pub param2: u32,
    /// Reserved.
    pub param3: u32,
}

impl HapPowerHmxV2 {
    /// The vote ggml's HTP makes at open: HMX powered, target, min and max
    /// corner at the maximum, perf mode high.
    pub fn max_clock() -> HapPowerHmxV2 {
        HapPowerHmxV2 {
            set_power: 1,
            power_up: 1,
            set_clock: 1,
            pick_default: 0,
            target_corner: HAP_DCVS_EXP_VCORNER_MAX,
            min_corner: HAP_DCVS_EXP_VCORNER_MAX,
            max_corner: HAP_DCVS_EXP_VCORNER_MAX,
            perf_mode: HAP_CLK_PERF_HIGH,
            ..HapPowerHmxV2::default()
        }
    }

    /// The struct's bytes, as sent to the DSP.
    pub fn to_bytes(&self) -> [u8; 40] {
        let mut out = [0u8; 40];
        out[..4].copy_from_slice(&[
            self.set_power,
            self.power_up,
            self.set_clock,
            self.pick_default,
        ]);
        let words = [
            self.target_corner,
            self.min_corner,
            self.max_corner,
            self.perf_mode,
            self.freq_mhz,
            self.floor_freq_mhz,
            self.param1,
            self.param2,
            self.param3,
        ];
        for (i, w) in words.iter().enumerate() {
            out[4 + 4 * i..8 + 4 * i].copy_from_slice(&w.to_ne_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_clock_votes_every_corner_at_max_with_high_perf() {
        let r = HapPowerHmxV2::max_clock();
        assert_eq!(std::mem::size_of::<HapPowerHmxV2>(), 40);
        assert_eq!(
            (r.target_corner, r.min_corner, r.max_corner),
            (0xFFFF, 0xFFFF, 0xFFFF)
        );
        assert_eq!(r.perf_mode, HAP_CLK_PERF_HIGH);
        assert_eq!(r.set_clock, 1);
        let b = r.to_bytes();
        assert_eq!(&b[..4], &[1, 1, 1, 0]);
        assert_eq!(u32::from_ne_bytes(b[4..8].try_into().unwrap()), 0xFFFF);
    }
}
