// `router-admin access-key create`: a new key with a fresh secret, printed on stdout. The store keeps only
// its HMAC (printed once); the keys file keeps its HMAC with store.access_key_hash_secret set, else the
// secret itself, and the message says which. A keys file that is missing or empty is started first.

import { Option, UsageError } from 'clipanion';
import type { RouterConfig } from '../../../common/config-types.ts';
import { EXIT } from '../../../common/exit-codes.ts';
import { generateSecret, type KeyBackend, parseExpiry } from '../../key-backend.ts';
import {
  formatLimits,
  formatModels,
  limitOption,
  limitsFromFlags,
  modelsFromFlag,
} from '../../limit-flags.ts';
import { AccessKeyCommand, accessKeyUsage, secretHeading } from './base.ts';

const NAME = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

export class CreateAccessKeyCommand extends AccessKeyCommand {
  static override paths = [['access-key', 'create']];
  static override usage = accessKeyUsage({
    description: 'Create an access key and print its secret',
    details: `
      Generates a secret (\`ak_\` + 43 base64url characters) and prints it on stdout. Shared store: only
      its HMAC-SHA256 under \`store.access_key_hash_secret\` is stored, so it is shown this once (rotate
      the key if it is lost). File mode: the key is added to the keys file, which a running gateway re-reads
      within about 0.1 s, as that HMAC when \`store.access_key_hash_secret\` is set, else as the secret in
      plain text (\`value\`). A keys file that does not exist yet, or is empty, is started (mode 0600).
      The key's own rate limits and model list are optional: the limits it leaves out, and the model list
      when it has none, are those of \`rate_limits.per_key\` (change them later with \`access-key update\`).
    `,
    examples: [
      [
        'Create a key whose billing subject is its name',
        '$0 access-key create --config router.yaml --name client-a',
      ],
      [
        'Bill another subject',
        '$0 access-key create --config router.yaml --name team-x-ci --subject-type team --subject-id team-x',
      ],
      [
        'Limit a key to 600 requests and 200000 tokens a minute, 8 at once, and two model families',
        '$0 access-key create --config router.yaml --name client-b --requests-per-minute 600 --tokens-per-minute 200000 --max-concurrent 8 --models "gpt-*,claude-*"',
      ],
    ],
  });

  name = Option.String('--name', { required: true, description: 'Key name (default subject id)' });
  subjectType = Option.String('--subject-type', {
    description: 'Billing subject type (default billing.subject_type)',
  });
  subjectId = Option.String('--subject-id', { description: 'Billing subject id (default the key name)' });
  expiresAt = Option.String('--expires-at', {
    description: 'ISO 8601 expiry (2027-01-01 or 2027-01-01T00:00:00Z)',
  });
  requestsPerMinute = limitOption('requestsPerMinute', 'key');
  tokensPerMinute = limitOption('tokensPerMinute', 'key');
  maxConcurrent = limitOption('maxConcurrent', 'key');
  models = Option.String('--models', {
    description: 'Client model ids the key may use, comma-separated; `*` and `?` match (gpt-*,claude-*)',
  });

  override validate(): void {
    if (!NAME.test(this.name))
      throw new UsageError(
        `invalid --name ${JSON.stringify(this.name)}: 1-128 letters, digits, '.', '_', ':', '@', '-'`,
      );
    this.limits();
    modelsFromFlag(this.models);
  }

  private limits() {
    return limitsFromFlags({
      requestsPerMinute: this.requestsPerMinute,
      tokensPerMinute: this.tokensPerMinute,
      maxConcurrent: this.maxConcurrent,
    });
  }

  override startsKeysFile(): boolean {
    return true;
  }

  async run(backend: KeyBackend, config: RouterConfig): Promise<number> {
    const secret = generateSecret();
    const key = {
      name: this.name,
      subjectType: this.subjectType ?? config.billing.subjectType,
      subjectId: this.subjectId ?? this.name,
      expiresAt: parseExpiry(this.expiresAt),
      limits: this.limits(),
      models: modelsFromFlag(this.models),
    };
    if ((await backend.create(key, secret)) === 'exists') {
      this.context.stderr.write(`router-admin: key ${this.name} already exists in the ${backend.where}\n`);
      return EXIT.failed;
    }
    const own =
      (Object.keys(key.limits).length === 0 ? '' : `, limits ${formatLimits(key.limits)}`) +
      (key.models === undefined ? '' : `, models ${formatModels(key.models)}`);
    this.context.stderr.write(
      `created key ${this.name} (subject ${key.subjectType}:${key.subjectId}${own}) in the ${backend.where}; ` +
        `${backend.pickup}\n${secretHeading(backend, this.name, 'secret')}\n`,
    );
    this.out(secret);
    return EXIT.ok;
  }
}
