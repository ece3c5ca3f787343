#![no_main]
//! The whole slow path: arbitrary packets into a core with an established peer.
use ilnp_core::{Core, CoreConfig, LocalLocator, LocatorState, PeerLocator, PeerRecord};
use ilnp_wire::translate::Csum;
use ilnp_wire::{Locator, Nid};
use libfuzzer_sys::fuzz_target;
use std::time::Instant;

struct Fixed(u64);
impl ilnp_core::RngCore for Fixed {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1);
        self.0
    }
    fn fill_bytes(&mut self, d: &mut [u8]) {
        for b in d {
            *b = self.next_u64() as u8;
        }
    }
    fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), ilnp_core::RngError> {
        self.fill_bytes(d);
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let now = Instant::now();
    let mut c = Core::new(
        CoreConfig::new(ilnp_wire::DEFAULT_IDENTIFIER_PREFIX, Nid(0x0200_00ff_fe00_000d)),
        Box::new(Fixed(1)),
    );
    c.set_local_locators(
        now,
        vec![LocalLocator {
            loc: Locator(0x2001_0db8_000b_0000),
            ifindex: 2,
            pref: 10,
            lifetime_s: 30,
            state: LocatorState::Active,
            has_router: true,
            deprecated: false,
        }],
    );
    c.add_peer(PeerRecord {
        name: "cn".into(),
        nid: Nid(0x0200_00ff_fe00_000c),
        locators: vec![PeerLocator { loc: Locator(0x2001_0db8_000a_0000), pref: 10 }],
    });
    let _ = c.handle_inbound(now, data, Csum::Complete);
    let _ = c.handle_outbound(now, data, Csum::Partial);
    let _ = c.handle_timeout(now);
});
