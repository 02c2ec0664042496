//! LOLWUT [VERSION v] …: redis-server 7.0's computer art. Version 5 draws Georg Nees's
//! *Schotter* in braille characters, version 6 a skyline of 8-bit games in terminal
//! colours, any other version the line LOLWUT answers for versions without art. Redis
//! draws with the C library's `rand()`; Goblin with its own generator, so the pictures
//! differ from redis-server's in their randomness, not in their making.

use std::f32::consts::PI;

use goblin_protocol::parse_i64;

use crate::errors;
use crate::runtime::server::REDIS_VERSION;
use crate::table::args::is_keyword;
use crate::table::handler::{Args, ConnCtx, Exec};
use crate::table::{CommandTable, meta};

/// Registers the command.
pub fn register(table: &mut CommandTable) {
    table.add(&meta::LOLWUT, Exec::Conn(lolwut));
}

/// A small generator in place of C's `rand()` (xorshift64*, seeded from the clock).
struct Rand(u64);

impl Rand {
    fn new() -> Rand {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        Rand(nanos | 1)
    }

    /// A number in `0..=RAND_MAX` (2³¹ − 1), as `rand()` gives.
    fn next(&mut self) -> i32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as i32
    }
}

const RAND_MAX: f32 = 2_147_483_647.0;

/// A canvas of pixels of a few colours.
struct Canvas {
    width: i32,
    height: i32,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: i32, height: i32, color: u8) -> Canvas {
        Canvas {
            width,
            height,
            pixels: vec![color; (width.max(0) as usize) * (height.max(0) as usize)],
        }
    }

    fn set(&mut self, x: i32, y: i32, color: u8) {
        if (0..self.width).contains(&x) && (0..self.height).contains(&y) {
            self.pixels[(x + y * self.width) as usize] = color;
        }
    }

    fn get(&self, x: i32, y: i32) -> u8 {
        if (0..self.width).contains(&x) && (0..self.height).contains(&y) {
            self.pixels[(x + y * self.width) as usize]
        } else {
            0
        }
    }

    /// Bresenham's line.
    fn line(&mut self, (mut x1, mut y1): (i32, i32), (x2, y2): (i32, i32), color: u8) {
        let (dx, dy) = ((x2 - x1).abs(), (y2 - y1).abs());
        let (sx, sy) = (if x1 < x2 { 1 } else { -1 }, if y1 < y2 { 1 } else { -1 });
        let mut err = dx - dy;
        loop {
            self.set(x1, y1, color);
            if x1 == x2 && y1 == y2 {
                break;
            }
            let e2 = err * 2;
            if e2 > -dy {
                err -= dy;
                x1 += sx;
            }
            if e2 < dx {
                err += dx;
                y1 += sy;
            }
        }
    }

    /// A square of side `size` centred on `x, y`, turned by `angle`.
    fn square(&mut self, x: i32, y: i32, size: f32, angle: f32) {
        let size = (size / std::f32::consts::SQRT_2).round();
        let mut k = PI / 4.0 + angle;
        let mut points = [(0, 0); 4];
        for p in &mut points {
            *p = (
                (k.sin() * size + x as f32).round() as i32,
                (k.cos() * size + y as f32).round() as i32,
            );
            k += PI / 2.0;
        }
        for j in 0..4 {
            self.line(points[j], points[(j + 1) % 4], 1);
        }
    }
}

/// Version 5: *Schotter*, `cols` terminal columns wide, squares turned and shifted more
/// the lower their row.
fn schotter(cols: i64, per_row: i64, per_col: i64, rand: &mut Rand) -> String {
    let (cols, per_row, per_col) = (
        cols.clamp(1, 1000),
        per_row.clamp(1, 200),
        per_col.clamp(1, 200),
    );
    let width = (cols * 2) as i32;
    let padding = if width > 4 { 2 } else { 0 };
    let side = (width - padding * 2) as f32 / per_row as f32;
    let height = (side * per_col as f32) as i32 + padding * 2;
    let mut canvas = Canvas::new(width, height, 0);
    for y in 0..per_col {
        for x in 0..per_row {
            let mut sx = (x as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut sy = (y as f32 * side + side / 2.0 + padding as f32) as i32;
            let mut angle = 0.0;
            if y > 1 {
                let mut r = [0.0f32; 3];
                for v in &mut r {
                    *v = rand.next() as f32 / RAND_MAX / per_col as f32 * y as f32;
                }
                for v in &mut r {
                    if rand.next() % 2 == 1 {
                        *v = -*v;
                    }
                }
                angle = r[0];
                sx += (r[1] * side / 3.0) as i32;
                sy += (r[2] * side / 3.0) as i32;
            }
            canvas.square(sx, sy, side, angle);
        }
    }
    // Each braille character shows 2×4 pixels.
    let mut text = String::new();
    let mut y = 0;
    while y < canvas.height {
        let mut x = 0;
        while x < canvas.width {
            let dots = [
                (0, 0),
                (0, 1),
                (0, 2),
                (1, 0),
                (1, 1),
                (1, 2),
                (0, 3),
                (1, 3),
            ];
            let byte = dots
                .iter()
                .enumerate()
                .filter(|(_, (dx, dy))| canvas.get(x + dx, y + dy) != 0)
                .fold(0u32, |b, (i, _)| b | (1 << i));
            text.push(char::from_u32(0x2800 + byte).unwrap_or(' '));
            x += 2;
        }
        if y != canvas.height - 1 {
            text.push('\n');
        }
        y += 4;
    }
    text.push_str("\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. ");
    text.push_str(REDIS_VERSION);
    text.push('\n');
    text
}

/// A skyscraper of version 6: `color`, windows of the other grays when `windows`.
fn skyscraper(
    canvas: &mut Canvas,
    (xoff, width, height): (i32, i32, i32),
    windows: bool,
    color: u8,
    rand: &mut Rand,
) {
    let start = canvas.height - 1;
    let end = start - height + 1;
    for y in (end..=start).rev() {
        for x in xoff..xoff + width {
            // The roof is four pixels narrower.
            if y == end && (x <= xoff + 1 || x >= xoff + width - 2) {
                continue;
            }
            let mut c = color;
            if windows && x > xoff + 1 && x < xoff + width - 2 && y > end + 1 && y < start - 1 {
                let (relx, rely) = (x - (xoff + 1), y - (end + 1));
                if (relx / 2) % 2 == 1 && rely % 2 == 1 {
                    loop {
                        c = 1 + (rand.next() % 2) as u8;
                        if c != color {
                            break;
                        }
                    }
                    if relx % 2 == 1 {
                        c = canvas.get(x - 1, y);
                    }
                }
            }
            canvas.set(x, y, c);
        }
    }
}

/// Version 6: a skyline, `cols` × `rows` terminal characters.
fn skyline(cols: i64, rows: i64, rand: &mut Rand) -> String {
    let (w, h) = (cols.clamp(1, 1000) as i32, rows.clamp(1, 1000) as i32);
    let mut canvas = Canvas::new(w, h, 3);
    let r = |rand: &mut Rand, n: i32| if n > 0 { rand.next() % n } else { 0 };
    for color in [2u8, 1] {
        let mut offset = -10;
        while offset < w {
            offset += r(rand, 8);
            let width = 10 + r(rand, 9);
            let height = if color == 2 {
                h / 2 + r(rand, h) / 2
            } else {
                h / 2 + r(rand, h) / 3
            };
            skyscraper(&mut canvas, (offset, width, height), false, color, rand);
            offset += if color == 2 { width / 2 } else { width + 1 };
        }
    }
    let mut offset = -10;
    while offset < w {
        offset += r(rand, 8);
        let mut width = 5 + r(rand, 14);
        if width % 4 != 0 {
            width += width % 3;
        }
        let height = h / 3 + r(rand, h) / 2;
        skyscraper(&mut canvas, (offset, width, height), true, 0, rand);
        offset += width + 5;
    }
    let mut text = String::new();
    for y in 0..h {
        for x in 0..w {
            let escape = match canvas.get(x, y) {
                1 => "0;90;100m",
                2 => "0;37;47m",
                3 => "0;97;107m",
                _ => "0;30;40m",
            };
            text.push_str("\x1b[");
            text.push_str(escape);
            text.push_str(" \x1b[0m");
        }
        if y != h - 1 {
            text.push('\n');
        }
    }
    text.push_str(
        "\nDedicated to the 8 bit game developers of past and present.\n\
         Original 8 bit image from Plaguemon by hikikomori. Redis ver. ",
    );
    text.push_str(REDIS_VERSION);
    text.push('\n');
    text
}

/// `LOLWUT [VERSION version] [arguments of that version's art]`
fn lolwut(ctx: &mut ConnCtx<'_>, args: &Args<'_>) {
    let (mut version, mut first) = (7, 1);
    if args.len() >= 3 && is_keyword(args.get(1), "VERSION") {
        let Some(v) = parse_i64(args.get(2)) else {
            return ctx.reply().error(errors::NOT_INTEGER);
        };
        // Redis prints the version as an unsigned int and reads its first digits.
        version = i64::from(v as u32);
        first = 3;
    }
    // The art's own arguments, integers, with their defaults.
    let mut numbers = Vec::new();
    let takes = if version == 5 { 3 } else { 2 };
    for i in first..args.len().min(first + takes) {
        match parse_i64(args.get(i)) {
            Some(n) => numbers.push(n),
            None if version == 5 || version == 6 => return ctx.reply().error(errors::NOT_INTEGER),
            None => break,
        }
    }
    let arg = |i: usize, default: i64| numbers.get(i).copied().unwrap_or(default);
    let mut rand = Rand::new();
    let text = match version {
        5 => schotter(arg(0, 66), arg(1, 8), arg(2, 12), &mut rand),
        6 => skyline(arg(0, 80), arg(1, 20), &mut rand),
        _ => format!("Redis ver. {REDIS_VERSION}\n"),
    };
    ctx.reply().verbatim(b"txt", text.as_bytes());
}
