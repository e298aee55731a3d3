// `router-admin access-key rotate`: a new secret for an existing key; the old one is refused from the
// moment running gateways apply the change (next request, or the keys file re-read in file mode).

import { Option } from 'clipanion';
import { EXIT } from '../../../common/exit-codes.ts';
import { generateSecret, type KeyBackend } from '../../key-backend.ts';
import { AccessKeyCommand, accessKeyUsage, secretHeading } from './base.ts';

export class RotateAccessKeyCommand extends AccessKeyCommand {
  static override paths = [['access-key', 'rotate']];
  static override usage = accessKeyUsage({
    description: 'Give a key a new secret and print it',
    details: `
      The old secret stops working at every instance's next request (shared store), or once a running
      gateway has re-read the keys file, within about 0.1 s (file mode). The new secret is printed on
      stdout: once, where only its HMAC is kept (the store; the keys file with
      \`store.access_key_hash_secret\` set); else it is also in the keys file in plain text.
    `,
    examples: [['Rotate a leaked key', '$0 access-key rotate --config router.yaml --name client-a']],
  });

  name = Option.String('--name', { required: true, description: 'Key name' });

  async run(backend: KeyBackend): Promise<number> {
    const secret = generateSecret();
    const key = await backend.rotate(this.name, secret);
    if (key === undefined) {
      this.context.stderr.write(`router-admin: no key named ${this.name} in the ${backend.where}\n`);
      return EXIT.failed;
    }
    this.context.stderr.write(
      `rotated key ${this.name}; ${backend.pickup}\n${secretHeading(backend, this.name, 'new secret')}\n`,
    );
    this.out(secret);
    return EXIT.ok;
  }
}
