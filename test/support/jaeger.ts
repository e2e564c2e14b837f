// The tracing tests' trace store is the one `fanout demo --trace` starts.
export {
  ancestorsOf,
  parentOf,
  startJaeger,
  tagOf,
  type Jaeger,
  type JaegerSpan,
  type JaegerTrace,
} from '../../src/local/jaeger';
