//! An IPv4 subnet (`address/prefix`): parsed, normalised, compared and counted, for the pod
//! network's subnet, the host's routes, the node-wide iptables rules and the service range.

use std::fmt;
use std::net::Ipv4Addr;

/// An IPv4 subnet, `address/prefix`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subnet {
    network: u32,
    prefix: u8,
}

impl Subnet {
    pub fn parse(text: &str) -> Option<Subnet> {
        let (address, prefix) = text.trim().split_once('/')?;
        let address: Ipv4Addr = address.parse().ok()?;
        let prefix: u8 = prefix.parse().ok().filter(|p| *p <= 32)?;
        Some(Subnet { network: u32::from(address) & Self::mask(prefix), prefix })
    }

    /// The subnet of a route: its destination and its netmask, as numbers.
    pub fn masked(destination: u32, mask: u32) -> Subnet {
        Subnet { network: destination & mask, prefix: mask.count_ones() as u8 }
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    fn mask(prefix: u8) -> u32 {
        if prefix == 0 { 0 } else { u32::MAX << (32 - prefix) }
    }

    /// Whether `address` is in the subnet.
    pub fn contains(&self, address: Ipv4Addr) -> bool {
        u32::from(address) & Self::mask(self.prefix) == self.network
    }

    /// How many addresses the subnet spans, its network and broadcast addresses included.
    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    /// The address `offset` past the network address (offset 0 is the network address itself).
    pub fn address_at(&self, offset: u64) -> Option<Ipv4Addr> {
        (offset < self.size()).then(|| Ipv4Addr::from(self.network + offset as u32))
    }

    /// How far `address` lies past the network address, if it is in the subnet.
    pub fn offset_of(&self, address: Ipv4Addr) -> Option<u64> {
        self.contains(address).then(|| u64::from(u32::from(address) - self.network))
    }

    /// Whether the two share an address.
    pub fn overlaps(&self, other: &Subnet) -> bool {
        let mask = Self::mask(self.prefix.min(other.prefix));
        self.network & mask == other.network & mask
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", Ipv4Addr::from(self.network), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subnets_parse_normalise_and_overlap() {
        let pods = Subnet::parse("10.77.0.0/16").unwrap();
        assert_eq!(pods.to_string(), "10.77.0.0/16");
        assert_eq!(Subnet::parse("10.77.3.4/16").unwrap(), pods, "host bits are dropped");
        assert!(pods.overlaps(&Subnet::parse("10.77.5.0/24").unwrap()));
        assert!(Subnet::parse("10.0.0.0/8").unwrap().overlaps(&pods));
        assert!(!pods.overlaps(&Subnet::parse("172.17.0.0/16").unwrap()));
        assert!(!pods.overlaps(&Subnet::parse("10.78.0.0/16").unwrap()));
        assert!(pods.contains("10.77.255.255".parse().unwrap()) && !pods.contains("10.78.0.0".parse().unwrap()));
        assert_eq!(pods.size(), 65536);
        assert_eq!(pods.address_at(258), Some(Ipv4Addr::new(10, 77, 1, 2)));
        assert_eq!(pods.offset_of(Ipv4Addr::new(10, 77, 1, 2)), Some(258));
        assert_eq!((pods.address_at(65536), pods.offset_of(Ipv4Addr::new(10, 78, 0, 0))), (None, None));
        assert_eq!(Subnet::parse("0.0.0.0/0").unwrap().size(), 1 << 32);
        for bad in ["10.77.0.0", "10.77.0.0/33", "ten/8", "10.77.0/16", ""] {
            assert_eq!(Subnet::parse(bad), None, "{bad:?}");
        }
    }
}
