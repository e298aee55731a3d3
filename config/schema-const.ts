// Generated from config/*.schema.json by `npm run gen:config-schema`; do not edit.

export const ROUTER_CONFIG_SCHEMA = {
  "$schema": "http://json-schema.org/draft-07/schema#",
  "$id": "https://llm-router-gateway.dev/schemas/router.schema.json",
  "title": "LLM router gateway: main configuration (router.yaml)",
  "description": "Main configuration file of the gateway (`router -c router.yaml`). Relative paths are resolved against the folder of this file. String values may use ${ENV} and ${ENV:-default}. ROUTER_* environment variables override the file. See docs/configuration.md.",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "listen": {
      "type": "string",
      "description": "Address the gateway listens on, \"host:port\". Env ROUTER_LISTEN.",
      "default": "127.0.0.1:8080",
      "pattern": "^(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9.-]*):[0-9]{1,5}$",
      "patternErrorMessage": "must be \"host:port\" (for example \"127.0.0.1:8080\" or \"[::1]:8080\")",
      "examples": [
        "127.0.0.1:8080",
        "0.0.0.0:8080"
      ]
    },
    "workers": {
      "type": [
        "integer",
        "string"
      ],
      "description": "Serving processes on this host, all on the one listen address: a number, or \"auto\" for one per core the process may use. With more than one, `router` runs a primary process that starts, restarts and signals them and runs the one billing sidecar. Env ROUTER_WORKERS.",
      "default": 1,
      "minimum": 1,
      "maximum": 256,
      "pattern": "^(auto|[1-9][0-9]{0,2})$",
      "patternErrorMessage": "must be a number of worker processes (1 to 256) or \"auto\"",
      "examples": [
        1,
        4,
        "auto"
      ]
    },
    "providers_dir": {
      "type": "string",
      "description": "Folder holding one `<provider>.conf` file per upstream provider (file name = provider name).",
      "default": "./providers",
      "minLength": 1
    },
    "models": {
      "type": "string",
      "description": "Path of the model registry file (models.yaml): which providers serve which client model ids. Without it only requests carrying `x-router-provider` can be routed.",
      "minLength": 1
    },
    "keys": {
      "type": "string",
      "description": "Path of the keys file (access keys of clients and upstream provider keys). Optional: keys can also come from ROUTER_ACCESS_KEY_<NAME> and ROUTER_PROVIDER_<NAME>_API_KEY.",
      "minLength": 1
    },
    "pricing": {
      "type": [
        "string",
        "array"
      ],
      "description": "Pricing file or list of pricing files (USD per 1M tokens per provider/model) used to price usage events.",
      "minLength": 1,
      "items": {
        "type": "string",
        "minLength": 1,
        "description": "Path of one pricing file."
      }
    },
    "master_key": {
      "type": "string",
      "description": "Administrative client key: accepted on every endpoint; requests made with it are billed to billing.fallback_subject_id. Env ROUTER_MASTER_KEY. Secret.",
      "minLength": 1
    },
    "limits": {
      "type": "object",
      "description": "Request size and upstream timing limits.",
      "additionalProperties": false,
      "default": {},
      "properties": {
        "max_body_bytes": {
          "type": "integer",
          "description": "Largest request body accepted; larger requests get 413.",
          "default": 10485760,
          "minimum": 1
        },
        "upstream_connect_timeout_ms": {
          "type": "integer",
          "description": "Time allowed to open the upstream connection.",
          "default": 5000,
          "minimum": 1
        },
        "upstream_headers_timeout_ms": {
          "type": "integer",
          "description": "Time until the upstream response headers arrive; exceeded -> 504.",
          "default": 60000,
          "minimum": 1
        },
        "upstream_body_timeout_ms": {
          "type": "integer",
          "description": "Longest silence between two upstream body chunks; exceeded -> 504 (or an error event on a stream).",
          "default": 300000,
          "minimum": 1
        },
        "early_count_wait_ms": {
          "type": "integer",
          "description": "An Anthropic client's stream served by another family: how long after asking the serving provider's token count (alongside the generation) message_start waits for it before stating the gateway's estimate instead (logged). 0: never ask, always the estimate.",
          "default": 1000,
          "minimum": 0,
          "maximum": 60000
        },
        "max_retries": {
          "type": "integer",
          "description": "Further providers tried after the first one on connect error, 429 or 5xx, before any byte went to the client.",
          "default": 1,
          "minimum": 0,
          "maximum": 10
        },
        "realtime_max_session_s": {
          "type": "integer",
          "description": "Longest a realtime (WebSocket) session may last; then it is closed (1008) once its current response has ended. 0: no limit.",
          "default": 0,
          "minimum": 0
        },
        "realtime_max_message_bytes": {
          "type": "integer",
          "description": "Largest WebSocket message of a realtime session, either way; a larger one closes the session (1009, message too big). The default holds OpenAI's largest audio append (15 MiB).",
          "default": 16777216,
          "minimum": 1024
        },
        "drain_timeout_ms": {
          "type": "integer",
          "description": "Time in-flight requests get to finish after SIGTERM.",
          "default": 30000,
          "minimum": 0
        },
        "client_header_timeout_ms": {
          "type": "integer",
          "description": "Time a client gets to send a request's headers, from its first byte (or from the connection for the first request); exceeded -> 408 and the connection is closed.",
          "default": 30000,
          "minimum": 1
        },
        "client_body_timeout_ms": {
          "type": "integer",
          "description": "Longest silence between two chunks of a request body; exceeded -> 408 and the connection is closed.",
          "default": 30000,
          "minimum": 1
        },
        "keepalive_timeout_ms": {
          "type": "integer",
          "description": "How long an idle keep-alive client connection stays open between two requests.",
          "default": 65000,
          "minimum": 1
        },
        "max_connections": {
          "type": "integer",
          "description": "Open client connections per process. At the cap, the connection idle for longest (no request in flight) is closed to admit a new one; when none is idle the new one is refused. Lowered at start-up to fit the file-descriptor limit.",
          "default": 20000,
          "minimum": 1
        },
        "max_header_bytes": {
          "type": "integer",
          "description": "Largest request line plus headers; larger -> 431 (414 when the URL alone is too long).",
          "default": 16384,
          "minimum": 1024
        },
        "max_json_depth": {
          "type": "integer",
          "description": "Deepest nesting of arrays and objects accepted in a JSON request body; deeper -> 400.",
          "default": 128,
          "minimum": 8,
          "maximum": 1000
        }
      }
    },
    "rate_limits": {
      "type": "object",
      "description": "Traffic limits per access key and per billing subject: requests and tokens per minute (a window sliding over the last 60 seconds) and requests in flight. Not request sizes or timeouts (those are `limits`). The master key is not limited. See docs/configuration.md \"rate_limits\".",
      "additionalProperties": false,
      "default": {},
      "properties": {
        "per_key": {
          "type": "object",
          "description": "Limits of every access key that sets none of its own (field by field: a key's `limits` fill in over these), and the model list of keys without `models`. Keys from ROUTER_ACCESS_KEY_<NAME> take these.",
          "additionalProperties": false,
          "default": {},
          "properties": {
            "requests_per_minute": {
              "type": "integer",
              "description": "Model requests a key may make in any 60 seconds. Unset: no limit.",
              "minimum": 1
            },
            "tokens_per_minute": {
              "type": "integer",
              "description": "Tokens (input, cache reads and writes included, plus output, as metered) a key may use in any 60 seconds. Unset: no limit.",
              "minimum": 1
            },
            "max_concurrent": {
              "type": "integer",
              "description": "Requests of a key in flight at once (a stream or a realtime session holds its slot until it ends). Unset: no limit.",
              "minimum": 1
            },
            "models": {
              "type": "array",
              "description": "Client model ids a key without its own `models` may use: ids or glob patterns with `*` (any characters) and `?` (one character). Unset: every model. An empty list is refused.",
              "items": {
                "type": "string",
                "description": "A model id or a glob pattern using `*` and `?` only.",
                "minLength": 1,
                "pattern": "^[^\\s,!\\\\\\[\\]{}]*$",
                "patternErrorMessage": "must be a model id or a pattern using only * and ? (no spaces, commas, !, \\, [ ], { })"
              },
              "examples": [
                [
                  "gpt-*",
                  "claude-*"
                ]
              ]
            }
          }
        },
        "per_subject": {
          "type": "object",
          "description": "Limits of every billing subject (all its keys together) that has no limits of its own (`subjects`, or `router-admin subject set-limits` in shared-store mode), field by field.",
          "additionalProperties": false,
          "default": {},
          "properties": {
            "requests_per_minute": {
              "type": "integer",
              "description": "Model requests of all the subject's keys in any 60 seconds. Unset: no limit.",
              "minimum": 1
            },
            "tokens_per_minute": {
              "type": "integer",
              "description": "Tokens (input plus output, as metered) of all the subject's keys in any 60 seconds. Unset: no limit.",
              "minimum": 1
            },
            "max_concurrent": {
              "type": "integer",
              "description": "Requests of all the subject's keys in flight at once; bounds how many requests one balance pre-check can admit together. Unset: no limit.",
              "minimum": 1
            }
          }
        },
        "failure_mode": {
          "type": "string",
          "description": "When the counters cannot be reached: open = admit the request (counted as limit=\"store_unavailable\"), closed = answer 503 rate_limit_unavailable.",
          "enum": [
            "open",
            "closed"
          ],
          "default": "open"
        },
        "lease_s": {
          "type": "number",
          "description": "A concurrency slot not renewed for this many seconds is free again (an instance that died holds none past it); live instances renew theirs every lease_s / 3.",
          "default": 30,
          "minimum": 3,
          "maximum": 3600
        },
        "subjects": {
          "type": "object",
          "description": "One subject's own limits, by \"<subject type>:<subject id>\" (for example \"api_key:team-a\"); fields left out take per_subject. For file mode; in shared-store mode `router-admin subject set-limits` stores them, and the stored ones win.",
          "default": {},
          "propertyNames": {
            "pattern": "^[^:]+:.+$",
            "patternErrorMessage": "must be \"<subject type>:<subject id>\" (for example \"api_key:team-a\")"
          },
          "additionalProperties": {
            "type": "object",
            "description": "The subject's own limits.",
            "additionalProperties": false,
            "properties": {
              "requests_per_minute": {
                "type": "integer",
                "description": "Model requests of all the subject's keys in any 60 seconds.",
                "minimum": 1
              },
              "tokens_per_minute": {
                "type": "integer",
                "description": "Tokens (input plus output, as metered) of all the subject's keys in any 60 seconds.",
                "minimum": 1
              },
              "max_concurrent": {
                "type": "integer",
                "description": "Requests of all the subject's keys in flight at once.",
                "minimum": 1
              }
            }
          }
        }
      }
    },
    "request_id": {
      "type": "object",
      "description": "Which request ids billing trusts (docs/billing.md \"Request ids\").",
      "additionalProperties": false,
      "default": {},
      "properties": {
        "trusted_sources": {
          "type": "array",
          "description": "Peer addresses or CIDR ranges (e.g. the ingress) whose X-Router-Request-Id becomes the billing id. They must send a unique id per request. From any other peer the gateway makes its own id and keeps the caller's as a correlation id.",
          "items": {
            "type": "string",
            "description": "An IPv4 or IPv6 address, or a CIDR range."
          },
          "default": [],
          "examples": [
            [
              "127.0.0.1",
              "10.0.0.0/8"
            ]
          ]
        }
      }
    },
    "responses": {
      "type": "object",
      "description": "Stored Responses API replies, which `previous_response_id` and `item_reference` resolve from for every provider (docs/translation.md \"Stored responses\"). A request with `store: false` is not stored; file mode keeps them in memory (the primary's with workers), shared-store mode in the store.",
      "additionalProperties": false,
      "default": {},
      "properties": {
        "store_ttl_s": {
          "type": "integer",
          "description": "How long a stored response (its input and output items) is kept, in seconds. 0 stores nothing (ids then resolve to nothing and are answered 404).",
          "minimum": 0,
          "default": 86400
        },
        "store_max_bytes": {
          "type": "integer",
          "description": "Largest stored response (input and output items as JSON); a larger one is served but not stored.",
          "minimum": 1024,
          "default": 1048576
        }
      }
    },
    "log": {
      "type": "object",
      "description": "Logging.",
      "additionalProperties": false,
      "default": {},
      "properties": {
        "level": {
          "type": "string",
          "description": "pino log level. Env ROUTER_LOG_LEVEL.",
          "enum": [
            "trace",
            "debug",
            "info",
            "warn",
            "error",
            "fatal",
            "silent"
          ],
          "default": "info"
        }
      }
    },
    "telemetry": {
      "type": "object",
      "description": "OpenTelemetry. The standard OTEL_* environment variables override these keys (docs/configuration.md \"Telemetry\").",
      "additionalProperties": false,
      "default": {},
      "properties": {
        "traces": {
          "type": "object",
          "description": "Traces exported over OTLP/HTTP: one server span per request, one client span per upstream attempt, the billing delivery linked to its request. Off unless an endpoint is set or the exporter is otlp.",
          "additionalProperties": false,
          "default": {},
          "properties": {
            "exporter": {
              "type": "string",
              "description": "otlp: export spans; none: tracing off. Default: otlp when an endpoint is set, none otherwise. Env OTEL_TRACES_EXPORTER.",
              "enum": [
                "otlp",
                "none"
              ]
            },
            "endpoint": {
              "type": "string",
              "description": "Base URL of the OTLP/HTTP receiver (an OpenTelemetry Collector, port 4318); /v1/traces is appended. Env OTEL_EXPORTER_OTLP_ENDPOINT.",
              "examples": [
                "http://otel-collector:4318"
              ]
            },
            "traces_endpoint": {
              "type": "string",
              "description": "Full URL for spans, used as given (wins over endpoint). Env OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.",
              "examples": [
                "http://otel-collector:4318/v1/traces"
              ]
            },
            "protocol": {
              "type": "string",
              "description": "OTLP encoding. Env OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, OTEL_EXPORTER_OTLP_PROTOCOL.",
              "enum": [
                "http/protobuf",
                "http/json"
              ],
              "default": "http/protobuf"
            },
            "headers": {
              "type": "object",
              "description": "Headers sent with every export (a collector's or vendor's API key). Secret. Env OTEL_EXPORTER_OTLP_HEADERS, OTEL_EXPORTER_OTLP_TRACES_HEADERS (key=value,key2=value2).",
              "additionalProperties": {
                "type": "string"
              },
              "default": {}
            },
            "sampler": {
              "type": "string",
              "description": "Which traces are kept. The parentbased_ samplers follow the sampled flag of an incoming traceparent. Env OTEL_TRACES_SAMPLER.",
              "enum": [
                "always_on",
                "always_off",
                "traceidratio",
                "parentbased_always_on",
                "parentbased_always_off",
                "parentbased_traceidratio"
              ],
              "default": "parentbased_always_on"
            },
            "sampler_arg": {
              "type": "number",
              "description": "The ratio of the traceidratio samplers, 0 to 1. Env OTEL_TRACES_SAMPLER_ARG.",
              "minimum": 0,
              "maximum": 1,
              "default": 1
            },
            "export_delay_ms": {
              "type": "integer",
              "description": "Longest wait before buffered spans are exported (they also go out once 512 are buffered). Env OTEL_BSP_SCHEDULE_DELAY.",
              "minimum": 1,
              "maximum": 60000,
              "default": 5000
            },
            "service_name": {
              "type": "string",
              "description": "service.name of the spans (the sidecar's carry the same name). Env OTEL_SERVICE_NAME.",
              "default": "llm-router"
            },
            "resource_attributes": {
              "type": "object",
              "description": "More resource attributes (deployment.environment.name, service.namespace, ...). Env OTEL_RESOURCE_ATTRIBUTES (key=value,key2=value2), merged over these.",
              "additionalProperties": {
                "type": "string"
              },
              "default": {}
            }
          }
        }
      }
    },
    "hooks": {
      "type": "array",
      "description": "Custom hook modules, run after the built-in hooks in the order listed.",
      "default": [],
      "items": {
        "type": "object",
        "description": "One custom hook module.",
        "additionalProperties": false,
        "required": [
          "module"
        ],
        "properties": {
          "module": {
            "type": "string",
            "description": "Module path (relative to this file when it starts with \".\" ) or package name.",
            "minLength": 1
          },
          "options": {
            "type": "object",
            "description": "Free-form options passed to the module once per configuration load.",
            "default": {}
          }
        }
      }
    },
    "sidecar": {
      "type": "object",
      "description": "The billing sidecar (router-billing).",
      "additionalProperties": false,
      "default": {},
      "properties": {
        "enabled": {
          "type": "boolean",
          "description": "Whether `router` starts `router-billing` as a supervised child process (`--no-sidecar` turns it off).",
          "default": true
        },
        "webhook_wait_ms": {
          "type": "integer",
          "description": "How long a webhook sent to the gateway's port waits for a supervised sidecar that is starting or restarting before it is answered 503.",
          "default": 5000,
          "minimum": 0
        }
      }
    },
    "billing": {
      "type": "object",
      "description": "Usage reporting to the billing service (Meterry).",
      "additionalProperties": false,
      "default": {},
      "properties": {
        "enabled": {
          "type": "boolean",
          "description": "Turns billing on. Env ROUTER_BILLING_ENABLED.",
          "default": false
        },
        "base_url": {
          "type": "string",
          "description": "Billing API address (the API host, not the portal host). http or https. Env ROUTER_BILLING_BASE_URL.",
          "examples": [
            "https://api.meterry.example"
          ]
        },
        "project_id": {
          "type": "string",
          "description": "Billing project id. Env ROUTER_BILLING_PROJECT_ID."
        },
        "api_key": {
          "type": "string",
          "description": "Billing API key with scope usage:ingest (and wallet read when balance enforcement is on). Env ROUTER_BILLING_API_KEY. Secret."
        },
        "extractor_rule_set_id": {
          "type": "string",
          "description": "Published extractor rule set id. Env ROUTER_BILLING_EXTRACTOR_RULE_SET_ID."
        },
        "read_api_key": {
          "type": "string",
          "description": "Billing API key with read access to usage events (GET /usage/events/details), used by `router-admin billing reconcile` only. Empty or unset: billing.api_key. Env ROUTER_BILLING_READ_API_KEY. Secret."
        },
        "source": {
          "type": "string",
          "description": "Value of the usage event `source` field.",
          "default": "router",
          "minLength": 1
        },
        "outbox_dir": {
          "type": "string",
          "description": "Directory of the pending-event file events.jsonl and delivery state (file mode). Env ROUTER_BILLING_OUTBOX_DIR. Default: $XDG_STATE_HOME/llm-router/outbox, or ~/.local/state/llm-router/outbox when XDG_STATE_HOME is unset.",
          "minLength": 1
        },
        "outbox_fsync_interval_ms": {
          "type": "integer",
          "description": "Least time between two fdatasync() calls of the outbox file (file mode). Events are written to the file before their reply ends, so a crash of the gateway loses none; a power loss can lose at most this much of the latest events. Larger values cost less CPU and disk under load; 0 syncs back to back. Env ROUTER_BILLING_OUTBOX_FSYNC_INTERVAL_MS.",
          "default": 100,
          "minimum": 0,
          "maximum": 10000
        },
        "state_dir": {
          "type": "string",
          "description": "Directory of the subject state (subjects.json) and processed webhook ids (file mode). Env ROUTER_BILLING_STATE_DIR. Default: $XDG_STATE_HOME/llm-router/state, or ~/.local/state/llm-router/state when XDG_STATE_HOME is unset.",
          "minLength": 1
        },
        "request_timeout_ms": {
          "type": "integer",
          "description": "Delivery (ingest) request timeout.",
          "default": 3000,
          "minimum": 1
        },
        "retry_interval_ms": {
          "type": "integer",
          "description": "Retry interval of a failed delivery: the first wait of the retry backoff.",
          "default": 1000,
          "minimum": 1
        },
        "max_retry_interval_ms": {
          "type": "integer",
          "description": "Upper bound of the retry backoff.",
          "default": 60000,
          "minimum": 1
        },
        "delivery_linger_ms": {
          "type": "integer",
          "description": "When new events arrive while the sidecar is idle, it waits this long before reading them, so a busy gateway's events are read and sent in batches instead of one wake-up per event. Adds at most this much to delivery latency; a backlog is read without waiting. 0 reads at once.",
          "default": 20,
          "minimum": 0,
          "maximum": 10000
        },
        "max_attempts": {
          "type": "integer",
          "description": "Delivery attempts before an event is dead-lettered (file mode; store mode uses store.billing_max_attempts).",
          "default": 10,
          "minimum": 1
        },
        "ledger_retention_h": {
          "type": "integer",
          "description": "Hours delivered usage events are kept as the gateway's ledger (delivered outbox segments in file mode, acknowledged stream entries in shared-store mode) for `router-admin billing reconcile`; the sidecar trims them by age. 0 deletes them once delivered (reconcile then has no ledger). Env ROUTER_BILLING_LEDGER_RETENTION_H.",
          "default": 72,
          "minimum": 0,
          "maximum": 8760
        },
        "only_billable_success": {
          "type": "boolean",
          "description": "When true, only 2xx model requests are reported.",
          "default": false
        },
        "item_detail": {
          "type": "string",
          "enum": [
            "spec",
            "detailed"
          ],
          "description": "How token usage is itemised in x-billing. spec: prompt_tokens and completion_tokens cover every token (cache reads and writes, audio), with exact pricing hints, so a rule set charging the specification's two metrics charges everything. detailed: cache_read_tokens, cache_creation_tokens, input_audio_tokens and output_audio_tokens are items of their own (rule sets written for them). See docs/billing.md \"Charge items\".",
          "default": "spec"
        },
        "interrupted_stream": {
          "type": "string",
          "enum": [
            "bill_delivered",
            "finish_upstream",
            "void"
          ],
          "description": "What a stream that ends before the provider's final usage is billed for (the client left, the upstream failed or cut it). bill_delivered: the upstream's counts so far, output at least what reached the client, usage_stage estimated. finish_upstream: the upstream is read on after the client left, for at most interrupted_stream_max_ms, and its final usage billed (usage_stage upstream); the request keeps its rate-limit slot and tokens until then. void: no event is sent (counted as void_interrupted): a client can stop a stream at its last chunk without paying. Every interrupted event names why in raw_json.meta.end_reason. See docs/billing.md \"Interrupted streams\".",
          "default": "bill_delivered"
        },
        "interrupted_stream_max_ms": {
          "type": "integer",
          "description": "finish_upstream: longest time a stream is read on after its client left; then it is cut and billed as bill_delivered would (end_reason timeout).",
          "default": 30000,
          "minimum": 1,
          "maximum": 3600000
        },
        "subject_type": {
          "type": "string",
          "description": "Billing subject type of usage events (the access key maps to the subject id).",
          "default": "api_key",
          "minLength": 1
        },
        "fallback_subject_id": {
          "type": "string",
          "description": "Subject id of requests made with the master key (usage events, balance checks); empty: they map to no subject and are not billed. Nothing else uses it: a missing or unknown access key is refused with 401 before any provider is called.",
          "default": ""
        },
        "listen": {
          "type": "string",
          "description": "Address of the sidecar (health, billing webhook), \"host:port\". Env ROUTER_BILLING_LISTEN.",
          "default": "127.0.0.1:8081",
          "pattern": "^(\\[[0-9A-Fa-f:.]+\\]|[A-Za-z0-9.-]*):[0-9]{1,5}$",
          "patternErrorMessage": "must be \"host:port\" (for example \"127.0.0.1:8080\" or \"[::1]:8080\")",
          "examples": [
            "127.0.0.1:8081",
            "0.0.0.0:8080"
          ]
        },
        "balance_enforcement": {
          "type": "object",
          "description": "Wallet balance pre-check before a request is served.",
          "additionalProperties": false,
          "default": {},
          "properties": {
            "enabled": {
              "type": "boolean",
              "description": "Turns the balance pre-check on (requires billing.enabled and a webhook_secret). Env ROUTER_BILLING_BALANCE_ENABLED.",
              "default": false
            },
            "currency": {
              "type": "string",
              "description": "Wallet currency. Env ROUTER_BILLING_BALANCE_CURRENCY.",
              "default": "USD",
              "minLength": 1
            },
            "failure_mode": {
              "type": "string",
              "description": "What happens when the balance lookup fails: closed = answer 503 billing_unavailable, open = serve the request. Env ROUTER_BILLING_BALANCE_FAILURE_MODE.",
              "enum": [
                "closed",
                "open"
              ],
              "default": "closed"
            },
            "request_timeout_ms": {
              "type": "integer",
              "description": "Balance lookup timeout. Env ROUTER_BILLING_BALANCE_REQUEST_TIMEOUT_MS.",
              "default": 1000,
              "minimum": 1
            },
            "webhook_path": {
              "type": "string",
              "description": "Path of the inbound billing webhook on the sidecar. Env ROUTER_BILLING_WEBHOOK_PATH.",
              "default": "/internal/billing/webhook",
              "pattern": "^/",
              "patternErrorMessage": "must start with \"/\""
            },
            "webhook_secret": {
              "type": "string",
              "description": "Webhook signing secret (HMAC-SHA256). Env ROUTER_BILLING_WEBHOOK_SECRET. Secret."
            },
            "timestamp_tolerance_s": {
              "type": "integer",
              "description": "Largest accepted age of a webhook timestamp, in seconds.",
              "default": 300,
              "minimum": 1
            },
            "cache_ttl_ms": {
              "type": "integer",
              "description": "How long an allowed (balance > 0) answer is cached.",
              "default": 5000,
              "minimum": 0
            },
            "denied_cache_ttl_ms": {
              "type": "integer",
              "description": "How long a denied (balance <= 0) answer is cached.",
              "default": 1000,
              "minimum": 0
            },
            "webhook_max_body_bytes": {
              "type": "integer",
              "description": "Largest webhook body accepted.",
              "default": 1048576,
              "minimum": 1
            }
          }
        }
      }
    },
    "store": {
      "type": "object",
      "description": "Shared store (Redis) for running several instances.",
      "additionalProperties": false,
      "default": {},
      "properties": {
        "enabled": {
          "type": "boolean",
          "description": "Turns shared-store mode on. Env ROUTER_STORE_ENABLED.",
          "default": false
        },
        "addr": {
          "type": "string",
          "description": "Single endpoint URL, redis:// or rediss://; with cluster: true, the seed nodes as comma-separated URLs (the first one's credentials and TLS apply to all). Env ROUTER_STORE_ADDR.",
          "pattern": "^rediss?://[^,]+(,rediss?://[^,]+)*$",
          "patternErrorMessage": "must be a redis:// or rediss:// URL (several, comma-separated, for the seed nodes of a cluster)",
          "examples": [
            "redis://127.0.0.1:6379",
            "redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379"
          ]
        },
        "cluster": {
          "type": "boolean",
          "description": "The store is a Redis Cluster (or a managed cluster-mode service): addr lists seed nodes, subject and key state share one hash slot, and the billing stream is sharded over billing_stream_shards slots. Env ROUTER_STORE_CLUSTER.",
          "default": false
        },
        "billing_stream_shards": {
          "type": "integer",
          "description": "Usage-event streams the gateways spread their batches over; every sidecar consumes all of them. More than 1 spreads the event rate over several Redis cores in a cluster. Env ROUTER_STORE_BILLING_STREAM_SHARDS.",
          "default": 1,
          "minimum": 1,
          "maximum": 64
        },
        "sentinels": {
          "type": "array",
          "description": "Redis Sentinel addresses (host:port) of a failover setup; the primary is asked of them by sentinel_name, and addr then gives only credentials, database and TLS. Env ROUTER_STORE_SENTINELS (comma-separated).",
          "items": {
            "type": "string",
            "description": "One Sentinel, host:port.",
            "pattern": "^[^\\s:]+:[0-9]{1,5}$",
            "patternErrorMessage": "must be host:port"
          },
          "default": []
        },
        "sentinel_name": {
          "type": "string",
          "description": "Name of the monitored primary in the sentinels' configuration. Env ROUTER_STORE_SENTINEL_NAME.",
          "default": "mymaster",
          "minLength": 1
        },
        "sentinel_password": {
          "type": "string",
          "description": "Password of the sentinels themselves (requirepass of sentinel.conf). Env ROUTER_STORE_SENTINEL_PASSWORD. Secret."
        },
        "username": {
          "type": "string",
          "description": "Store user name (ACL). Env ROUTER_STORE_USERNAME."
        },
        "password": {
          "type": "string",
          "description": "Store password. Env ROUTER_STORE_PASSWORD. Secret."
        },
        "tls": {
          "type": "boolean",
          "description": "Use TLS (also implied by a rediss:// address).",
          "default": false
        },
        "tls_ca_file": {
          "type": "string",
          "description": "PEM file of the CA certificate(s) trusted for the store's TLS connections, instead of Node's default roots (as redis-cli --cacert). Relative to this file's folder; needs TLS on. Env ROUTER_STORE_TLS_CA_FILE.",
          "minLength": 1
        },
        "tls_cert_file": {
          "type": "string",
          "description": "PEM file of the client certificate presented to the store (for a server with tls-auth-clients); set together with tls_key_file. Relative to this file's folder; needs TLS on. Env ROUTER_STORE_TLS_CERT_FILE.",
          "minLength": 1
        },
        "tls_key_file": {
          "type": "string",
          "description": "PEM file of the unencrypted private key of tls_cert_file. Relative to this file's folder; needs TLS on. Env ROUTER_STORE_TLS_KEY_FILE.",
          "minLength": 1
        },
        "key_prefix": {
          "type": "string",
          "description": "Namespace prefix of every key, identical on all instances. Env ROUTER_STORE_KEY_PREFIX.",
          "default": "router:"
        },
        "operation_timeout_ms": {
          "type": "integer",
          "description": "Timeout of one store operation.",
          "default": 500,
          "minimum": 1
        },
        "view_cache_ms": {
          "type": "integer",
          "description": "How long the gateway may keep an access-key / subject-state / cached-balance read in process. Redis pushes every change of those keys (CLIENT TRACKING), so entries are dropped when they change; this is only the upper bound. 0 reads the store on every request.",
          "default": 2000,
          "minimum": 0
        },
        "access_key_mode": {
          "type": "string",
          "description": "Where access keys are looked up: redis_preferred (store, then keys file; store down -> 503), redis_only, file_only.",
          "enum": [
            "redis_preferred",
            "redis_only",
            "file_only"
          ],
          "default": "redis_preferred"
        },
        "billing_stream": {
          "type": "string",
          "description": "Name of the usage-event stream.",
          "default": "billing:events",
          "minLength": 1
        },
        "billing_consumer_group": {
          "type": "string",
          "description": "Consumer group of the billing stream, the same on all instances.",
          "default": "router-billing",
          "minLength": 1
        },
        "billing_consumer_name": {
          "type": "string",
          "description": "Consumer name, unique per process; empty = generated from hostname and process id.",
          "default": ""
        },
        "billing_wait_replicas": {
          "type": "integer",
          "description": "Replicas that must acknowledge each batch of usage events (WAIT, bounded by operation_timeout_ms) before the gateway counts it recorded; a batch they do not acknowledge goes to the spool. 0 = off. Set it to 1 with Sentinel or any replicated primary, so a failover cannot lose an event the primary had not yet replicated.",
          "default": 0,
          "minimum": 0
        },
        "billing_max_attempts": {
          "type": "integer",
          "description": "Delivery attempts before a stream entry is moved to the dead-letter stream.",
          "default": 10,
          "minimum": 1
        },
        "access_key_hash_secret": {
          "type": "string",
          "description": "HMAC secret for stored access-key hashes, identical on all instances. Env ROUTER_ACCESS_KEY_HASH_SECRET. Secret."
        },
        "previous_access_key_hash_secret": {
          "type": "string",
          "description": "The hash secret being rotated away from, during a rotation window only: a key found under its hash is re-hashed with access_key_hash_secret when used. Identical on all instances. Env ROUTER_ACCESS_KEY_PREVIOUS_HASH_SECRET. Secret."
        },
        "reclaim_idle_ms": {
          "type": "integer",
          "description": "Idle time after which another consumer reclaims a pending stream entry.",
          "default": 30000,
          "minimum": 1
        }
      }
    }
  }
} as const;

export const MODELS_SCHEMA = {
  "$schema": "http://json-schema.org/draft-07/schema#",
  "$id": "https://llm-router-gateway.dev/schemas/models.schema.json",
  "title": "LLM router gateway: model registry (models.yaml)",
  "description": "Maps the model ids clients send to the providers that serve them. See docs/configuration.md.",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "models": {
      "type": [
        "object",
        "null"
      ],
      "description": "Client model id -> how to route it. An id ending in `*` is a prefix pattern (`gpt-*`): it routes every id with that prefix that has no exact entry, the longest pattern winning, and is never listed by GET /v1/models.",
      "default": {},
      "additionalProperties": {
        "$ref": "#/definitions/model"
      }
    }
  },
  "definitions": {
    "model": {
      "type": "object",
      "description": "Routing of one client model id (or prefix pattern).",
      "additionalProperties": false,
      "required": [
        "providers"
      ],
      "properties": {
        "providers": {
          "type": "array",
          "description": "Providers serving this model, each a provider name or {provider, model} to send a different upstream model name.",
          "minItems": 1,
          "items": {
            "$ref": "#/definitions/route"
          }
        },
        "strategy": {
          "type": "string",
          "description": "priority: always start with the first provider, the others are retry fallbacks. round_robin: rotate the starting provider per request.",
          "enum": [
            "round_robin",
            "priority"
          ],
          "default": "priority"
        },
        "owned_by": {
          "type": "string",
          "description": "`owned_by` shown by GET /v1/models.",
          "minLength": 1
        }
      }
    },
    "route": {
      "type": [
        "string",
        "object"
      ],
      "description": "A provider name (file name of its .conf without extension), or {provider, model}.",
      "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$",
      "patternErrorMessage": "must be a provider name (letters, digits, '.', '_', '-')",
      "additionalProperties": false,
      "required": [
        "provider"
      ],
      "properties": {
        "provider": {
          "type": "string",
          "description": "Provider name.",
          "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$",
          "patternErrorMessage": "must be a provider name (letters, digits, '.', '_', '-')"
        },
        "model": {
          "type": "string",
          "description": "Model name sent upstream instead of the requested one.",
          "minLength": 1
        }
      }
    }
  }
} as const;

export const KEYS_SCHEMA = {
  "$schema": "http://json-schema.org/draft-07/schema#",
  "$id": "https://llm-router-gateway.dev/schemas/keys.schema.json",
  "title": "LLM router gateway: keys file (keys.yaml)",
  "description": "Client access keys and upstream provider keys. Keep this file out of version control; values may use ${ENV}. See docs/configuration.md.",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "access_keys": {
      "type": [
        "array",
        "null"
      ],
      "description": "Keys clients present as `Authorization: Bearer`, `x-api-key`, `x-goog-api-key` or `?key=`.",
      "default": [],
      "items": {
        "type": "object",
        "description": "One client access key: a name plus either the plaintext `value` or its `hash`.",
        "additionalProperties": false,
        "required": [
          "name"
        ],
        "properties": {
          "name": {
            "type": "string",
            "description": "Unique key name; the default billing subject id.",
            "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
            "patternErrorMessage": "must be 1-128 characters: letters, digits, '.', '_', ':', '@', '-' (not starting with a symbol)"
          },
          "value": {
            "type": "string",
            "description": "Plaintext secret (use ${ENV} to keep it out of the file). Exactly one of value or hash.",
            "minLength": 1
          },
          "hash": {
            "type": "string",
            "description": "base64url(HMAC-SHA256(store.access_key_hash_secret, secret)), as `router-admin access-key create` prints. Exactly one of value or hash.",
            "pattern": "^[A-Za-z0-9_-]{43}$",
            "patternErrorMessage": "must be 43 base64url characters (an HMAC-SHA256 digest)"
          },
          "subject_type": {
            "type": "string",
            "description": "Billing subject type; default billing.subject_type.",
            "minLength": 1
          },
          "subject_id": {
            "type": "string",
            "description": "Billing subject id; default the key name."
          },
          "status": {
            "type": "string",
            "description": "Only active keys are accepted.",
            "enum": [
              "active",
              "revoked",
              "disabled"
            ],
            "default": "active"
          },
          "expires_at": {
            "type": "string",
            "description": "ISO 8601 date (`2027-01-01`, midnight UTC) or date-time with zone (`2027-01-01T12:00:00Z`); the key is rejected from then on."
          },
          "created_at": {
            "type": "string",
            "description": "ISO 8601 date or date-time with zone; informational."
          },
          "limits": {
            "type": "object",
            "description": "The key's own traffic limits; fields left out take rate_limits.per_key of the main file. Windows slide over the last 60 seconds.",
            "additionalProperties": false,
            "properties": {
              "requests_per_minute": {
                "type": "integer",
                "description": "Model requests the key may make in any 60 seconds.",
                "minimum": 1
              },
              "tokens_per_minute": {
                "type": "integer",
                "description": "Tokens (input, cache reads and writes included, plus output, as metered) the key may use in any 60 seconds.",
                "minimum": 1
              },
              "max_concurrent": {
                "type": "integer",
                "description": "Requests of the key in flight at once (a stream or a realtime session holds its slot until it ends).",
                "minimum": 1
              }
            }
          },
          "models": {
            "type": "array",
            "description": "Client model ids the key may use: ids or glob patterns with `*` (any characters) and `?` (one character). Absent: rate_limits.per_key.models, else every model. An empty list is refused.",
            "items": {
              "type": "string",
              "description": "A model id or a glob pattern using `*` and `?` only.",
              "minLength": 1,
              "pattern": "^[^\\s,!\\\\\\[\\]{}]*$",
              "patternErrorMessage": "must be a model id or a pattern using only * and ? (no spaces, commas, !, \\, [ ], { })"
            },
            "examples": [
              [
                "gpt-*",
                "claude-*"
              ]
            ]
          }
        }
      }
    },
    "providers": {
      "type": [
        "object",
        "null"
      ],
      "description": "Upstream credentials per provider name: `api_key` for one key, or `keys` for several used round robin.",
      "default": {},
      "additionalProperties": {
        "type": "object",
        "description": "Credentials of one provider: api_key or keys, and/or the cloud credentials its provider file's auth block names (aws, service_account_file, entra).",
        "additionalProperties": false,
        "properties": {
          "aws": {
            "type": "object",
            "description": "AWS credentials for `auth_sigv4` (Bedrock). AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN win over them.",
            "additionalProperties": false,
            "required": [
              "access_key_id",
              "secret_access_key"
            ],
            "properties": {
              "access_key_id": {
                "type": "string",
                "description": "The access key id.",
                "minLength": 1
              },
              "secret_access_key": {
                "type": "string",
                "description": "The secret access key.",
                "minLength": 1
              },
              "session_token": {
                "type": "string",
                "description": "The session token of temporary credentials.",
                "minLength": 1
              }
            }
          },
          "service_account_file": {
            "type": "string",
            "description": "A Google service account key file (JSON) for `auth_google` (Vertex AI), relative to this file's folder. GOOGLE_APPLICATION_CREDENTIALS wins over it.",
            "minLength": 1
          },
          "entra": {
            "type": "object",
            "description": "A Microsoft Entra ID application for `auth_entra` (Azure OpenAI), client-credentials grant. AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET win over it.",
            "additionalProperties": false,
            "required": [
              "tenant_id",
              "client_id",
              "client_secret"
            ],
            "properties": {
              "tenant_id": {
                "type": "string",
                "description": "The directory (tenant) id.",
                "minLength": 1
              },
              "client_id": {
                "type": "string",
                "description": "The application (client) id.",
                "minLength": 1
              },
              "client_secret": {
                "type": "string",
                "description": "The client secret.",
                "minLength": 1
              }
            }
          },
          "api_key": {
            "type": "string",
            "description": "The provider's single key (channel name `default`).",
            "minLength": 1
          },
          "keys": {
            "type": "array",
            "description": "Several keys (channels), used round robin; pricing may override per channel (`openai/key1`).",
            "minItems": 1,
            "items": {
              "type": "object",
              "description": "One upstream key.",
              "additionalProperties": false,
              "required": [
                "name",
                "value"
              ],
              "properties": {
                "name": {
                  "type": "string",
                  "description": "Channel name, unique within the provider.",
                  "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$",
                  "patternErrorMessage": "must be letters, digits, '.', '_', '-'"
                },
                "value": {
                  "type": "string",
                  "description": "The key.",
                  "minLength": 1
                }
              }
            }
          }
        }
      }
    }
  }
} as const;
