import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  GetQueueUrlCommand,
  ListQueuesCommand,
  QueueDoesNotExist,
  QueueNameExists,
  type SQSClient,
} from "@aws-sdk/client-sqs";

/**
 * Queue names and URLs of the `sqs` JobQueue. Each model has three standard queues:
 *
 * - `<prefix><model>`: priorities 0-4,
 * - `<prefix><model>-high`: priorities 5-9 (consumers drain it first),
 * - `<prefix><model>-dlq`: the dead-letter queue both live queues redrive to.
 *
 * Terraform (or a person) may create them ahead of time with these names; otherwise the
 * adapter creates them itself, idempotently.
 */
export interface SqsQueueUrls {
  model: string;
  normal: string;
  high: string;
  dead: string;
}

export interface SqsQueueNames {
  normal: string;
  high: string;
  dead: string;
}

export const HIGH_SUFFIX = "-high";
export const DEAD_SUFFIX = "-dlq";

/** SQS's own rule for standard queue names. */
const QUEUE_NAME = /^[A-Za-z0-9_-]{1,80}$/;
// The longest suffix decides how long `<prefix><model>` may be.
const LONGEST_SUFFIX = Math.max(HIGH_SUFFIX.length, DEAD_SUFFIX.length);
// Dead-lettered messages are kept as long as SQS allows (14 days) for people to look at.
const DEAD_LETTER_RETENTION_SECONDS = 14 * 24 * 60 * 60;

/** The three queue names of `model`; throws when SQS could not name them. */
export function sqsQueueNames(prefix: string, model: string): SqsQueueNames {
  const base = `${prefix}${model}`;
  if (!QUEUE_NAME.test(`${base}${"x".repeat(LONGEST_SUFFIX)}`)) {
    throw new Error(
      `cannot name SQS queues for model "${model}" with prefix "${prefix}": SQS queue names ` +
        `allow only letters, digits, '-' and '_' (no '.'), and "${base}" must stay within ` +
        `${80 - LONGEST_SUFFIX} characters`,
    );
  }
  if (model.endsWith(HIGH_SUFFIX) || model.endsWith(DEAD_SUFFIX)) {
    throw new Error(
      `model "${model}" ends like one of the adapter's own queues (${HIGH_SUFFIX}, ${DEAD_SUFFIX})`,
    );
  }
  return { normal: base, high: `${base}${HIGH_SUFFIX}`, dead: `${base}${DEAD_SUFFIX}` };
}

export interface QueueDirectorySettings {
  prefix: string;
  /** Create missing queues; when false they must exist already (least-privilege agents). */
  create: boolean;
  maxAttempts: number;
  leaseSeconds: number;
}

/**
 * Resolves models to queue URLs, once per model and instance. A failed resolution is
 * forgotten so the next call tries again (SQS was unreachable, the queues were not made yet).
 */
export class QueueDirectory {
  private readonly resolved = new Map<string, Promise<SqsQueueUrls>>();

  constructor(
    private readonly client: SQSClient,
    private readonly settings: QueueDirectorySettings,
  ) {}

  /** The model's queues, created first when the directory may create them. */
  urls(model: string): Promise<SqsQueueUrls> {
    let urls = this.resolved.get(model);
    if (!urls) {
      const names = sqsQueueNames(this.settings.prefix, model);
      urls = this.settings.create ? this.create(model, names) : this.find(model, names);
      this.resolved.set(model, urls);
      urls.catch(() => this.resolved.delete(model));
    }
    return urls;
  }

  /** The model's queues if they exist, without creating anything; null when they do not. */
  async existing(model: string): Promise<SqsQueueUrls | null> {
    const known = this.resolved.get(model);
    if (known) return known;
    try {
      const found = this.find(model, sqsQueueNames(this.settings.prefix, model));
      await found;
      if (!this.resolved.has(model)) this.resolved.set(model, found);
      return await found;
    } catch (error) {
      if (error instanceof QueueDoesNotExist) return null;
      throw error;
    }
  }

  /** Every queue URL whose name starts with the prefix, dead-letter queues included. */
  async listAll(): Promise<string[]> {
    const urls: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(
        new ListQueuesCommand({
          QueueNamePrefix: this.settings.prefix,
          MaxResults: 1000,
          NextToken: token,
        }),
      );
      urls.push(...(page.QueueUrls ?? []));
      token = page.NextToken;
    } while (token);
    return urls;
  }

  /** Models that have queues under the prefix: what a consumer without a model list serves. */
  async models(): Promise<string[]> {
    const names = (await this.listAll()).map(queueNameOf);
    const models = names
      .filter((name) => !name.endsWith(HIGH_SUFFIX) && !name.endsWith(DEAD_SUFFIX))
      .map((name) => name.slice(this.settings.prefix.length));
    return models.filter((model) => model.length > 0).sort();
  }

  /** DLQ first (the redrive policy names its ARN), then both live queues. */
  private async create(model: string, names: SqsQueueNames): Promise<SqsQueueUrls> {
    const dead = await this.createQueue(names.dead, {
      MessageRetentionPeriod: String(DEAD_LETTER_RETENTION_SECONDS),
    });
    const attributes = await this.client.send(
      new GetQueueAttributesCommand({ QueueUrl: dead, AttributeNames: ["QueueArn"] }),
    );
    const deadArn = attributes.Attributes?.QueueArn;
    if (!deadArn) throw new Error(`SQS did not return the ARN of ${names.dead}`);
    const live = {
      VisibilityTimeout: String(this.settings.leaseSeconds),
      RedrivePolicy: JSON.stringify({
        deadLetterTargetArn: deadArn,
        maxReceiveCount: this.settings.maxAttempts,
      }),
    };
    const [normal, high] = await Promise.all([
      this.createQueue(names.normal, live),
      this.createQueue(names.high, live),
    ]);
    return { model, normal, high, dead };
  }

  /**
   * CreateQueue is idempotent only for identical attributes. A queue made earlier with other
   * settings (Terraform, or a gateway with another lease or attempt limit) is used as it is:
   * consumers pass their own visibility timeout on every receive and enforce their own
   * attempt limit, so its settings are only the broker's defaults and safety net.
   */
  private async createQueue(name: string, attributes: Record<string, string>): Promise<string> {
    try {
      const created = await this.client.send(
        new CreateQueueCommand({ QueueName: name, Attributes: attributes }),
      );
      if (created.QueueUrl) return created.QueueUrl;
    } catch (error) {
      if (!(error instanceof QueueNameExists)) throw error;
    }
    return this.urlOf(name);
  }

  private async find(model: string, names: SqsQueueNames): Promise<SqsQueueUrls> {
    const [normal, high, dead] = await Promise.all([
      this.urlOf(names.normal),
      this.urlOf(names.high),
      this.urlOf(names.dead),
    ]);
    return { model, normal, high, dead };
  }

  private async urlOf(name: string): Promise<string> {
    const found = await this.client.send(new GetQueueUrlCommand({ QueueName: name }));
    if (!found.QueueUrl) throw new Error(`SQS returned no URL for queue ${name}`);
    return found.QueueUrl;
  }
}

/** A queue URL ends with the queue's name (`https://sqs.<region>.amazonaws.com/<account>/<name>`). */
export function queueNameOf(url: string): string {
  return url.slice(url.lastIndexOf("/") + 1);
}
