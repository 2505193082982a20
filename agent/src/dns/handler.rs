//! The cluster domain as a zone of hickory's catalog: each question is answered from the
//! [`ClusterZone`] of the moment, which [`ClusterDomain::replace`] swaps whole when the
//! Services change.

use std::sync::{Arc, RwLock};

use hickory_server::proto::op::ResponseCode;
use hickory_server::proto::rr::{LowerName, RecordType, TSigResponseContext};
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
