//! The `Vit` task's spec as written in a pipeline file ([`VitSpec`]), its
//! validation, and the resolved shape and run parameters ([`VitConfig`]) that
//! `results.json` records under `config`.

use serde::{Deserialize, Deserializer, Serialize};

/// `Vit(...)` in a pipeline file. The model is named by `model:
/// "vit{patch}x{depth}x{dim}"` or by explicit `patch`, `depth`, `dim` (an
/// explicit field wins over the name).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VitSpec {
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub model: Option<String>,
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub patch: Option<u32>,
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub depth: Option<u32>,
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub dim: Option<u32>,
    /// Attention heads; default `dim / 64`.
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub heads: Option<u32>,
    /// Hidden width of the MLP; default `4 * dim`.
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub mlp_dim: Option<u32>,
    /// The resolution the model sees.
    #[serde(default = "default_image_size")]
    pub image_size: u32,
    /// The resolution of the synthetic uint8 source images, resized to
    /// `image_size` by preprocessing; default `image_size * 8 / 7` (256 for 224).
    #[serde(
        default,
        deserialize_with = "bare_some",
        skip_serializing_if = "Option::is_none"
    )]
    pub source_size: Option<u32>,
    #[serde(default = "default_num_classes")]
    pub num_classes: u32,
    #[serde(default = "default_batch")]
    pub batch: u32,
    /// Warm-up batches, run before measuring and not counted.
    #[serde(default = "default_warmup")]
    pub warmup: u32,
    /// Images measured (rounded up to whole batches).
    #[serde(default = "default_samples")]
    pub samples: u32,
    /// "f32", "f16" or "bf16".
    #[serde(default = "default_dtype")]
    pub dtype: String,
    /// "cpu", "cuda" or "cuda:N".
    #[serde(default = "default_device")]
    pub device: String,
    #[serde(default)]
    pub pipeline: Pipeline,
    #[serde(default)]
    pub preprocess: Preprocess,
    #[serde(default)]
    pub trace: Trace,
    /// With `trace: Cupti`: the batches recorded, after (and apart from) the
    /// timed ones, so tracing never slows the timing figures. Default: as
    /// many as are timed. Left out of the key when not given.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "bare_some"
    )]
    pub trace_batches: Option<u32>,
    /// `Cuda`: the forward pass is captured once into a CUDA graph after
    /// warm-up and replayed for every batch. Left out of the key when `None`.
    #[serde(default, skip_serializing_if = "Graph::is_none")]
    pub graph: Graph,
    /// Run under `numactl --cpunodebind=N --membind=N`.
    #[serde(default)]
    pub numa: Option<u32>,
    #[serde(default)]
    pub seed: u64,
    /// After `warmup` (and a CUDA graph's capture), keep warming up in
    /// blocks of [`SETTLE_BLOCK`] batches until a block's median latency is
    /// within [`SETTLE_REL`] of the block before it, at most this many
    /// batches more. Left out of the key when not given.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "bare_some"
    )]
    pub settle: Option<u32>,
    /// The members of a block measured together (a stage's `together`
    /// axes), each a spec of its own: set when the stage expands, never
    /// written in a pipeline file. This spec is then the first member's.
    /// Left out of the serialized spec when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub together: Option<Box<super::block::VitBlock>>,
}

/// Batches per block of `settle`.
pub const SETTLE_BLOCK: u32 = 25;
/// How close two blocks' medians must be for `settle` to stop.
pub const SETTLE_REL: f64 = 0.02;

/// How batches flow from preprocessing to the model (RQ5).
///
/// Written `Sync` or `Async(queue: N, workers: N)`, or as a string
/// (`"sync"`, `"async:QUEUE"`, `"async:QUEUE:WORKERS"`, workers defaulting
/// to 2) so that a matrix axis of scalars can sweep it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum Pipeline {
    /// Preprocess, copy, run, copy back, one batch at a time.
    #[default]
    Sync,
    /// `workers` threads preprocess batches into a bounded queue of depth
    /// `queue` while the model runs.
    Async { queue: u32, workers: u32 },
}

impl Pipeline {
    /// Workers an `"async:QUEUE"` string gets.
    const DEFAULT_WORKERS: u32 = 2;

    /// Parses the string form; `None` when `s` is not one.
    fn parse_short(s: &str) -> Option<Pipeline> {
        let mut parts = s.split(':');
        match parts.next()?.to_ascii_lowercase().as_str() {
            "sync" => parts.next().is_none().then_some(Pipeline::Sync),
            "async" => {
                let queue = parts.next()?.parse().ok()?;
                let workers = match parts.next() {
                    Some(w) => w.parse().ok()?,
                    None => Self::DEFAULT_WORKERS,
                };
                parts
                    .next()
                    .is_none()
                    .then_some(Pipeline::Async { queue, workers })
            }
            _ => None,
        }
    }
}

const PIPELINE_EXPECTED: &str =
    "`Sync`, `Async(queue: N, workers: N)`, \"sync\", \"async:QUEUE\" or \"async:QUEUE:WORKERS\"";

impl<'de> Deserialize<'de> for Pipeline {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_enum("Pipeline", &["Sync", "Async"], PipelineVisitor)
    }
}

struct PipelineVisitor;

impl<'de> serde::de::Visitor<'de> for PipelineVisitor {
    type Value = Pipeline;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(PIPELINE_EXPECTED)
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Pipeline, E> {
        Pipeline::parse_short(s)
            .ok_or_else(|| E::custom(format!("unknown `pipeline` {s:?}; use {PIPELINE_EXPECTED}")))
    }

    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<Pipeline, A::Error> {
        use serde::de::VariantAccess;
        let (VariantName(name), variant) = data.variant()?;
        if name == "Async" {
            return variant.struct_variant(&["queue", "workers"], AsyncVisitor);
        }
        variant.unit_variant()?;
        self.visit_str::<A::Error>(&name)
    }
}

/// A variant's name, read as an identifier (RON writes it unquoted).
struct VariantName(String);

impl<'de> Deserialize<'de> for VariantName {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = VariantName;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a variant name")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<VariantName, E> {
                Ok(VariantName(s.to_owned()))
            }
        }
        d.deserialize_identifier(Name)
    }
}

/// Reads `Async(queue: N, workers: N)`'s fields (a struct variant in RON,
/// the variant's object in JSON).
struct AsyncVisitor;

impl<'de> serde::de::Visitor<'de> for AsyncVisitor {
    type Value = Pipeline;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("`Async(queue: N, workers: N)`")
    }

    fn visit_map<M: serde::de::MapAccess<'de>>(self, mut map: M) -> Result<Pipeline, M::Error> {
        use serde::de::Error;
        let (mut queue, mut workers) = (None, None);
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "queue" => queue = Some(map.next_value::<u32>()?),
                "workers" => workers = Some(map.next_value::<u32>()?),
                other => return Err(M::Error::unknown_field(other, &["queue", "workers"])),
            }
        }
        Ok(Pipeline::Async {
            queue: queue.ok_or_else(|| M::Error::missing_field("queue"))?,
            workers: workers.ok_or_else(|| M::Error::missing_field("workers"))?,
        })
    }
}

/// How the forward pass is launched.
///
/// Written `None` or `Cuda`, or as a string (`"none"`, `"cuda"`) so that a
/// matrix axis of scalars can sweep it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub enum Graph {
    /// Op by op from the CPU, as eager PyTorch does.
    #[default]
    None,
    /// Captured once after warm-up into a CUDA graph (static input and
    /// output buffers), then replayed: one launch per forward pass.
    Cuda,
}

impl Graph {
    pub fn is_none(&self) -> bool {
        *self == Graph::None
    }
}

const GRAPH_EXPECTED: &str = "`None`, `Cuda`, \"none\" or \"cuda\"";

impl<'de> Deserialize<'de> for Graph {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_enum("Graph", &["None", "Cuda"], GraphVisitor)
    }
}

struct GraphVisitor;

impl<'de> serde::de::Visitor<'de> for GraphVisitor {
    type Value = Graph;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(GRAPH_EXPECTED)
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Graph, E> {
        match s.to_ascii_lowercase().as_str() {
            "none" => Ok(Graph::None),
            "cuda" => Ok(Graph::Cuda),
            _ => Err(E::custom(format!(
                "unknown `graph` {s:?}; use {GRAPH_EXPECTED}"
            ))),
        }
    }

    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<Graph, A::Error> {
        use serde::de::VariantAccess;
        let (VariantName(name), variant) = data.variant()?;
        variant.unit_variant()?;
        self.visit_str::<A::Error>(&name)
    }
}

/// Where images are resized, normalized and cast.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Preprocess {
    #[default]
    Cpu,
    Gpu,
}

/// Which profiler records the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Trace {
    #[default]
    None,
    /// CUPTI, from inside the task, into `trace.sqlite`.
    Cupti,
    /// The whole task under `nsys profile`, into `trace.nsys-rep`.
    Nsys,
}

/// Optional fields written bare (`patch: 16`, `model: "vit16x12x768"`), the
/// way pipeline files give them, rather than as RON's `Some(16)`.
fn bare_some<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}
fn default_image_size() -> u32 {
    224
}
fn default_num_classes() -> u32 {
    1000
}
fn default_batch() -> u32 {
    1
}
fn default_warmup() -> u32 {
    10
}
fn default_samples() -> u32 {
    256
}
fn default_dtype() -> String {
    "f32".to_owned()
}
fn default_device() -> String {
    "cuda".to_owned()
}

/// The element type, parsed from `dtype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    F32,
    F16,
    Bf16,
}

impl Dtype {
    pub fn parse(s: &str) -> Option<Dtype> {
        match s {
            "f32" | "float32" => Some(Dtype::F32),
            "f16" | "float16" | "half" => Some(Dtype::F16),
            "bf16" | "bfloat16" => Some(Dtype::Bf16),
            _ => None,
        }
    }
}

/// A device, parsed from `device`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Device {
    Cpu,
    Cuda(u32),
}

impl Device {
    pub fn parse(s: &str) -> Option<Device> {
        match s {
            "cpu" => Some(Device::Cpu),
            "cuda" => Some(Device::Cuda(0)),
            _ => s.strip_prefix("cuda:")?.parse().ok().map(Device::Cuda),
        }
    }

    pub fn is_cuda(self) -> bool {
        matches!(self, Device::Cuda(_))
    }
}

/// The resolved model shape and run parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VitConfig {
    pub model: String,
    pub patch: u32,
    pub depth: u32,
    pub dim: u32,
    pub heads: u32,
    pub mlp_dim: u32,
    pub image_size: u32,
    pub source_size: u32,
    pub num_classes: u32,
    pub batch: u32,
    pub warmup: u32,
    pub samples: u32,
    /// Measured batches: `samples / batch`, rounded up.
    pub batches: u32,
    pub dtype: Dtype,
    pub device: Device,
    pub pipeline: Pipeline,
    pub preprocess: Preprocess,
    pub trace: Trace,
    /// Batches recorded by `trace: Cupti`, apart from the timed ones.
    #[serde(default)]
    pub trace_batches: u32,
    /// How the forward pass is launched (`None` in files from before it).
    #[serde(default)]
    pub graph: Graph,
    pub numa: Option<u32>,
    pub seed: u64,
    /// See [`VitSpec::settle`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settle: Option<u32>,
}

impl VitConfig {
    /// Patches per image (tokens without the class token).
    pub fn patches(&self) -> u64 {
        let side = u64::from(self.image_size / self.patch);
        side * side
    }
}

/// `"vit{patch}x{depth}x{dim}"` → (patch, depth, dim).
pub fn parse_model(name: &str) -> Option<(u32, u32, u32)> {
    let rest = name.strip_prefix("vit")?;
    let mut parts = rest.split('x').map(|p| p.parse::<u32>().ok());
    let shape = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(shape)
}

impl VitSpec {
    /// Checks the spec, naming the offending field; the pipeline loader calls
    /// it at load time and the task again at node start.
    pub fn validate(&self) -> Result<(), String> {
        self.resolve()?;
        match &self.together {
            Some(block) => block.validate(),
            None => Ok(()),
        }
    }

    /// The resolved configuration, or the first problem found.
    pub fn resolve(&self) -> Result<VitConfig, String> {
        let named = match &self.model {
            Some(name) => Some(parse_model(name).ok_or_else(|| {
                format!("`model` {name:?} is not of the form \"vit{{patch}}x{{depth}}x{{dim}}\" (e.g. \"vit16x12x768\")")
            })?),
            None => None,
        };
        let pick = |explicit: Option<u32>, from_name: Option<u32>, field: &str| {
            explicit.or(from_name).ok_or_else(|| {
                format!("`{field}` is missing: give `model: \"vit{{patch}}x{{depth}}x{{dim}}\"` or `{field}`")
            })
        };
        let patch = pick(self.patch, named.map(|n| n.0), "patch")?;
        let depth = pick(self.depth, named.map(|n| n.1), "depth")?;
        let dim = pick(self.dim, named.map(|n| n.2), "dim")?;
        for (field, value) in [
            ("patch", patch),
            ("depth", depth),
            ("dim", dim),
            ("batch", self.batch),
        ] {
            if value == 0 {
                return Err(format!("`{field}` must be at least 1"));
            }
        }
        let heads = self.heads.unwrap_or((dim / 64).max(1));
        if heads == 0 || dim % heads != 0 {
            return Err(format!(
                "`dim` ({dim}) is not divisible by `heads` ({heads})"
            ));
        }
        let mlp_dim = self.mlp_dim.unwrap_or(4 * dim);
        if mlp_dim == 0 {
            return Err("`mlp_dim` must be at least 1".to_owned());
        }
        if self.image_size == 0 || !self.image_size.is_multiple_of(patch) {
            return Err(format!(
                "`image_size` ({}) is not divisible by `patch` ({patch})",
                self.image_size
            ));
        }
        let source_size = self.source_size.unwrap_or(self.image_size * 8 / 7);
        if source_size == 0 {
            return Err("`source_size` must be at least 1".to_owned());
        }
        if self.num_classes == 0 {
            return Err("`num_classes` must be at least 1".to_owned());
        }
        if self.samples == 0 {
            return Err("`samples` must be at least 1".to_owned());
        }
        if let Some(n) = self.trace_batches {
            if self.trace != Trace::Cupti {
                return Err(
                    "`trace_batches` is for `trace: Cupti` (the batches recorded apart from the timed ones); remove it or set `trace: Cupti`"
                        .to_owned(),
                );
            }
            if n == 0 {
                return Err("`trace_batches` must be at least 1".to_owned());
            }
        }
        let dtype = Dtype::parse(&self.dtype).ok_or_else(|| {
            format!(
                "`dtype` {:?} is unknown; use \"f32\", \"f16\" or \"bf16\"",
                self.dtype
            )
        })?;
        let device = Device::parse(&self.device).ok_or_else(|| {
            format!(
                "`device` {:?} is unknown; use \"cpu\", \"cuda\" or \"cuda:N\"",
                self.device
            )
        })?;
        if self.graph == Graph::Cuda && !device.is_cuda() {
            return Err(format!(
                "`graph: Cuda` captures the forward pass into a CUDA graph, which needs a GPU, but `device` is {:?}; set `device: \"cuda\"` or remove `graph`",
                self.device
            ));
        }
        if let Pipeline::Async { queue, workers } = self.pipeline {
            if queue == 0 || workers == 0 {
                return Err(
                    "`pipeline`: Async needs `queue` and `workers` of at least 1".to_owned(),
                );
            }
        }
        let model = format!("vit{patch}x{depth}x{dim}");
        Ok(VitConfig {
            model,
            patch,
            depth,
            dim,
            heads,
            mlp_dim,
            image_size: self.image_size,
            source_size,
            num_classes: self.num_classes,
            batch: self.batch,
            warmup: self.warmup,
            samples: self.samples,
            batches: self.samples.div_ceil(self.batch),
            dtype,
            device,
            pipeline: self.pipeline,
            preprocess: self.preprocess,
            trace: self.trace,
            trace_batches: self
                .trace_batches
                .unwrap_or(self.samples.div_ceil(self.batch)),
            graph: self.graph,
            numa: self.numa,
            seed: self.seed,
            settle: self.settle,
        })
    }
}
