//! The cluster domain as a zone of hickory's catalog: each question is answered from the
//! [`ClusterZone`] of the moment, which [`ClusterDomain::replace`] swaps whole when the
//! Services change. The same zone answers the reverse zones ([`ClusterReverse`]) for the
//! cluster's addresses, and passes other reverse names on to the forwarder behind it.

use std::sync::{Arc, RwLock};

use hickory_server::proto::op::ResponseCode;
use hickory_server::proto::rr::{LowerName, Name, RecordType, TSigResponseContext};
use hickory_server::server::{Request, RequestInfo};
use hickory_server::zone_handler::{
    AuthLookup, AxfrPolicy, LookupControlFlow, LookupError, LookupOptions, LookupRecords, ZoneHandler, ZoneType,
};

use super::records::{Answer, ClusterZone};

/// The authoritative zone of the cluster domain.
pub struct ClusterDomain {
    origin: LowerName,
    zone: RwLock<Arc<ClusterZone>>,
}

impl ClusterDomain {
    pub fn new(zone: ClusterZone) -> ClusterDomain {
        ClusterDomain { origin: LowerName::from(zone.origin().clone()), zone: RwLock::new(Arc::new(zone)) }
    }

    /// Answers from `zone` from now on.
    pub fn replace(&self, zone: ClusterZone) {
        *self.zone.write().expect("no writer panics") = Arc::new(zone);
    }

    fn current(&self) -> Arc<ClusterZone> {
        self.zone.read().expect("no writer panics").clone()
    }
}

#[async_trait::async_trait]
impl ZoneHandler for ClusterDomain {
    fn zone_type(&self) -> ZoneType {
        ZoneType::Primary
    }

    fn axfr_policy(&self) -> AxfrPolicy {
        AxfrPolicy::Deny
    }

    fn origin(&self) -> &LowerName {
        &self.origin
    }

    async fn lookup(
        &self,
        name: &LowerName,
        type_: RecordType,
        _request: Option<&RequestInfo<'_>>,
        _options: LookupOptions,
    ) -> LookupControlFlow<AuthLookup> {
        LookupControlFlow::Break(match self.current().lookup(name, type_) {
            Answer::Records { answers, additionals } => Ok(AuthLookup::answers(
                LookupRecords::Section(answers),
                (!additionals.is_empty()).then_some(LookupRecords::Section(additionals)),
            )),
            Answer::NoData => Err(LookupError::NameExists),
            Answer::NxDomain => Err(LookupError::ResponseCode(ResponseCode::NXDomain)),
        })
    }

    async fn search(&self, request: &Request, options: LookupOptions) -> (LookupControlFlow<AuthLookup>, Option<TSigResponseContext>) {
        let info = match request.request_info() {
            Ok(info) => info,
            Err(e) => return (LookupControlFlow::Break(Err(e)), None),
        };
        (self.lookup(info.query.name(), info.query.query_type(), Some(&info), options).await, None)
    }

    /// No DNSSEC: the zone is not signed.
    async fn nsec_records(&self, _name: &LowerName, _options: LookupOptions) -> LookupControlFlow<AuthLookup> {
        LookupControlFlow::Break(Ok(AuthLookup::default()))
    }
}

/// The reverse zones (`in-addr.arpa`, `ip6.arpa`): PTR of the cluster's addresses from the
/// [`ClusterDomain`]'s zone; any other name goes on to the next handler of the catalog (the
/// forwarder), or, with none behind, is refused as every name outside the cluster is then.
pub struct ClusterReverse {
    origin: LowerName,
    domain: Arc<ClusterDomain>,
    forwarder_behind: bool,
}

impl ClusterReverse {
    pub fn new(origin: Name, domain: Arc<ClusterDomain>, forwarder_behind: bool) -> ClusterReverse {
        ClusterReverse { origin: LowerName::from(origin), domain, forwarder_behind }
    }
}

#[async_trait::async_trait]
impl ZoneHandler for ClusterReverse {
    fn zone_type(&self) -> ZoneType {
        ZoneType::Primary
    }

    fn axfr_policy(&self) -> AxfrPolicy {
        AxfrPolicy::Deny
    }

    fn origin(&self) -> &LowerName {
        &self.origin
    }

    async fn lookup(
        &self,
        name: &LowerName,
        type_: RecordType,
        _request: Option<&RequestInfo<'_>>,
        _options: LookupOptions,
    ) -> LookupControlFlow<AuthLookup> {
        match self.domain.current().reverse(name, type_) {
            Some(Answer::Records { answers, .. }) => {
                LookupControlFlow::Break(Ok(AuthLookup::answers(LookupRecords::Section(answers), None)))
            }
            Some(_) => LookupControlFlow::Break(Err(LookupError::NameExists)),
            None if self.forwarder_behind => LookupControlFlow::Skip,
            None => LookupControlFlow::Break(Err(LookupError::ResponseCode(ResponseCode::Refused))),
        }
    }

    async fn search(&self, request: &Request, options: LookupOptions) -> (LookupControlFlow<AuthLookup>, Option<TSigResponseContext>) {
        let info = match request.request_info() {
            Ok(info) => info,
            Err(e) => return (LookupControlFlow::Break(Err(e)), None),
        };
        (self.lookup(info.query.name(), info.query.query_type(), Some(&info), options).await, None)
    }

    /// No DNSSEC: the zone is not signed.
    async fn nsec_records(&self, _name: &LowerName, _options: LookupOptions) -> LookupControlFlow<AuthLookup> {
        LookupControlFlow::Break(Ok(AuthLookup::default()))
    }
}
